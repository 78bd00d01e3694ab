/* The index of node names: every builder call checks that its name is new, and model files and tied layers look
 * layers up by name, so a lookup must not read every node. An open-addressed table of node indices (linear
 * probing, FNV-1a hashes), kept at most half full; names are never removed. */
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "graph/graph.h"

static uint32_t name_hash(const char *s) {
    uint32_t h = 2166136261u;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

/* The slot holding name, or the empty slot where it would go. */
static int slot_of(const snug_graph *g, const char *name) {
    const int mask = g->names.n_slots - 1;
    int i = (int)(name_hash(name) & (uint32_t)mask);
    while (g->names.slots[i] >= 0 && strcmp(g->nodes[g->names.slots[i]].name, name) != 0) i = (i + 1) & mask;
    return i;
}

int graph_find_node(const snug_graph *g, const char *name) {
    if (!name || g->names.n_slots == 0) return -1;
    return g->names.slots[slot_of(g, name)];
}

/* Doubles the table (from 64 slots) and inserts every node again. */
static bool grow(snug_graph *g) {
    if (g->names.n_slots > INT_MAX / 2) return false;
    const int slots = g->names.n_slots ? 2 * g->names.n_slots : 64;
    int *slots_new = malloc((size_t)slots * sizeof *slots_new);
    if (!slots_new) return false;
    for (int i = 0; i < slots; i++) slots_new[i] = -1;
    free(g->names.slots);
    g->names.slots = slots_new;
    g->names.n_slots = slots;
    for (int i = 0; i < g->n_nodes; i++) g->names.slots[slot_of(g, g->nodes[i].name)] = i;
    return true;
}

bool graph_index_name(snug_graph *g, int node) {
    if (2 * ((size_t)node + 1) > (size_t)g->names.n_slots && !grow(g)) return false;
    g->names.slots[slot_of(g, g->nodes[node].name)] = node;
    return true;
}
