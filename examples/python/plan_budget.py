#!/usr/bin/env python3
"""Plans a model for a memory budget: what one optimizer step needs, by category, and what fits when it does
not. No training, no engine memory: a model far larger than this machine plans in a moment.

usage: plan_budget.py [MODEL] [BUDGET] [BATCH]     (default vgg16 2GiB 64)"""
import sys

import snug

name = sys.argv[1] if len(sys.argv) > 1 else "vgg16"
budget = sys.argv[2] if len(sys.argv) > 2 else "2GiB"
batch = int(sys.argv[3]) if len(sys.argv) > 3 else 64

model = snug.Model(name)
try:
    plan = snug.plan(model, batch=batch, mem=budget)
except snug.OutOfBudget as e:
    print(f"{name} does not fit {budget} at any micro-batch: {e}")
    print(f"the least budget: {e.smallest_budget:,} bytes")
    sys.exit(3)
print(plan)  # the report `snug plan` prints
print(f"\nchosen: {plan.micro_batches} micro-batches of {plan.micro_batch}, checkpoint {plan.checkpoint}")
for category, n in plan.bytes.items():
    print(f"  {category:<12} {snug.format_bytes(n):>12}")
