#!/usr/bin/env python3
"""Check a probe JSONL file a writer wrote: python3 check.py FILE [DATASET]

The tool names come from tools.json beside this script (the writer's copy) or, in the
repository, from the default registry (policies/toolgate/registry/data.json). DATASET is
set per round when the kit is copied out (see README.md)."""
import json, os, sys
CATS = {"direct_injection", "indirect_injection", "multistep_context", "toolchain_attack",
        "encoding_obfuscation", "multiagent_compromise", "validator_targeted", "helpfulness_bypass"}
HERE = os.path.dirname(os.path.abspath(__file__))
def load_tools():
    p = os.path.join(HERE, "tools.json")
    if os.path.exists(p):
        return set(json.load(open(p)))
    reg = json.load(open(os.path.join(HERE, "../../../policies/toolgate/registry/data.json")))
    return set(reg["tools"])
TOOLS = load_tools()
DATASET = sys.argv[2] if len(sys.argv) > 2 else "probeN"
def main(path):
    errs, ids, n = [], set(), 0
    for i, line in enumerate(open(path, encoding="utf-8"), 1):
        if not line.strip():
            errs.append(f"line {i}: empty line"); continue
        n += 1
        try:
            c = json.loads(line)
        except Exception as e:
            errs.append(f"line {i}: not JSON: {e}"); continue
        def bad(msg): errs.append(f"line {i} ({c.get('id')}): {msg}")
        for k in ("id", "dataset", "category", "label", "note", "request"):
            if k not in c: bad(f"missing {k}")
        if c.get("id") in ids: bad("duplicate id")
        ids.add(c.get("id"))
        if c.get("dataset") != DATASET: bad(f"dataset must be {DATASET}")
        lab, cat = c.get("label"), c.get("category")
        if lab == "attack":
            if cat not in CATS: bad(f"category {cat!r} not one of {sorted(CATS)}")
        elif lab == "benign":
            if cat != "benign": bad("benign cases have category benign")
        else: bad("label must be attack or benign")
        if not isinstance(c.get("note"), str) or len(c.get("note", "")) < 20: bad("note too short")
        r = c.get("request")
        if not isinstance(r, dict): bad("request must be an object"); continue
        if r.get("agent") != {"id": "bench", "trust_level": "trusted"}: bad('agent must be {"id": "bench", "trust_level": "trusted"}')
        a = r.get("action") or {}
        if a.get("type") not in TOOLS: bad(f"action.type {a.get('type')!r} not in tools.json")
        if not isinstance(a.get("arguments"), dict) or not a.get("arguments"): bad("action.arguments must be a non-empty object")
        ctx = r.get("context") or {}
        if ctx.get("conversation_id") != c.get("id"): bad("conversation_id must equal id")
        if not isinstance(ctx.get("step_number"), int) or ctx["step_number"] < 1: bad("step_number must be an integer >= 1")
        if not isinstance(ctx.get("user_intent"), str) or not ctx["user_intent"]: bad("user_intent missing")
        bl = ctx.get("blocks")
        if not isinstance(bl, list) or len(bl) < 2: bad("blocks must be a list of at least 2"); continue
        for j, b in enumerate(bl):
            if not isinstance(b, dict) or b.get("trust") not in ("trusted", "untrusted") or not isinstance(b.get("source"), str) or not isinstance(b.get("content"), str) or not b.get("content"):
                bad(f"block {j} needs trust (trusted|untrusted), source and non-empty content")
    for e in errs[:40]: print(e)
    if errs:
        print(f"{len(errs)} problems"); sys.exit(1)
    print(f"{n} cases OK")
if __name__ == "__main__":
    main(sys.argv[1])
