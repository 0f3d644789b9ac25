#!/usr/bin/env python3
"""Speculative vs plain greedy decoding on several held-out code prompts, interleaved.

Each pass runs, for every prompt (300-byte slices of models/heldout.txt at the given offsets), plain
decoding and then every named configuration, one after another, so that a noisy machine moves them
together; a configuration's ratio is its decode tok/s over the same prompt's and pass's plain run.
Prints one JSON object: per configuration the ratios, their mean and median, drafts accepted/drafted.

  bench/cpu/spec_prompts.py [--bin build/diskformer] [--passes 2] [--offsets 0,9000,...] \
      [--args "-t 2"] NAME='ARGS' ...
  e.g. base='--spec mtp' ctx='--spec mtp --draft-vocab 1024 --draft-context 256'
"""
import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run(binary, prompt_file, args):
    out = subprocess.run([binary, 'run', '-f', prompt_file, '-n', '256', '--temp', '0', '--output', 'json', '-q'] + args,
                         capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit('diskformer run failed: ' + out.stderr.strip())
    return json.loads(out.stdout)['stats']


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--bin', default=os.path.join(ROOT, 'build', 'diskformer'))
    ap.add_argument('--passes', type=int, default=2)
    ap.add_argument('--offsets', default='0,9000,20000,31000,40000,52000')
    ap.add_argument('--args', default='-t 2', help='arguments of every run (plain too)')
    ap.add_argument('configs', nargs='+', help="NAME='ARGS'")
    a = ap.parse_args()
    configs = dict(c.split('=', 1) for c in a.configs)
    common = shlex.split(a.args)
    text = open(os.path.join(ROOT, 'models', 'heldout.txt')).read()
    prompt_file = '/tmp/df_spec_prompt.txt'
    res = {k: {'ratios': [], 'accepted': 0, 'drafted': 0} for k in configs}
    for _ in range(a.passes):
        for off in (int(x) for x in a.offsets.split(',')):
            with open(prompt_file, 'w') as f:
                f.write(text[off:off + 300])
            plain = run(a.bin, prompt_file, common + ['--spec', 'none'])['decode_tokens_per_second']
            for name, args in configs.items():
                st = run(a.bin, prompt_file, common + shlex.split(args))
                res[name]['ratios'].append(st['decode_tokens_per_second'] / plain)
                spec = st.get('spec') or {}
                res[name]['accepted'] += spec.get('accepted', 0)
                res[name]['drafted'] += spec.get('drafted', 0)
    for r in res.values():
        r['mean'] = statistics.mean(r['ratios'])
        r['median'] = statistics.median(r['ratios'])
    print(json.dumps(res, indent=1))


if __name__ == '__main__':
    main()
