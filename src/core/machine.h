/* The memory this machine lets the process hold (snug_machine_memory_get in snug.h): physical memory, and the
 * limit of the process's control group, read from /proc and /sys. Machine state, not a setting: nothing here
 * reads the environment. */
#ifndef SNUG_CORE_MACHINE_H
#define SNUG_CORE_MACHINE_H

#include <stddef.h>

/* The tightest memory limit of the control groups this process belongs to, from the files under `root` ("/" for
 * this machine; a test gives a folder laid out the same way): for each hierarchy named in root/proc/self/cgroup
 * that has a memory limit (cgroup v2: memory.max under sys/fs/cgroup or sys/fs/cgroup/unified; v1: the memory
 * controller's memory.limit_in_bytes under sys/fs/cgroup/memory), the smallest limit on the group's path from
 * the group up to the hierarchy's root. 0: no limit ("max", v1's page-rounded LONG_MAX) or nothing readable. */
size_t machine_cgroup_limit(const char *root);

#endif
