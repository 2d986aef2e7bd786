// Summarises a V8 .cpuprofile (from `npm run bench -- --profile`): self time by function and by
// package or source area, and inclusive time of chosen frames.
//   node bench/profile-summary.ts <file.cpuprofile> [--top 25] [--focus name,name] [--from-ms N]
//   (--from-ms: only samples taken N ms or more after the profile began, to leave start-up out)
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';

interface Frame {
  readonly functionName: string;
  readonly url: string;
  readonly lineNumber: number;
}
interface Node {
  readonly id: number;
  readonly callFrame: Frame;
  readonly children?: number[];
}
interface Profile {
  readonly nodes: Node[];
  readonly samples: number[];
  readonly timeDeltas: number[];
}

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: { top: { type: 'string', default: '25' }, focus: { type: 'string' }, 'from-ms': { type: 'string', default: '0' } },
});
const file = positionals[0];
if (!file) throw new Error('usage: node bench/profile-summary.ts <file.cpuprofile>');
const profile = JSON.parse(readFileSync(file, 'utf8')) as Profile;
const byId = new Map(profile.nodes.map((n) => [n.id, n]));
const parent = new Map<number, number>();
for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);

// Sample i is taken at the sum of the deltas up to it; samples before --from-ms weigh nothing.
const fromUs = Number(values['from-ms']) * 1000;
let at = 0;
const weight = profile.timeDeltas.map((d) => ((at += d) >= fromUs ? d : 0));
const self = new Map<number, number>();
profile.samples.forEach((id, i) => self.set(id, (self.get(id) ?? 0) + (weight[i] ?? 0)));
const total = [...self.values()].reduce((a, b) => a + b, 0);
const idle = [...self.entries()].filter(([id]) => ['(idle)', '(program)'].includes(byId.get(id)?.callFrame.functionName ?? '')).reduce((a, [, t]) => a + t, 0);

const area = (url: string): string => {
  const nm = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (nm?.[1]) return nm[1];
  if (url.startsWith('node:')) return url.split('/')[0] ?? url;
  const src = /\/(src\/[^/]+(?:\/[^/]+)?)\//.exec(url);
  if (src?.[1]) return src[1];
  return url === '' ? '(native/vm)' : url.replace(/^.*\//, '');
};
const name = (f: Frame): string => `${f.functionName || '(anonymous)'} ${area(f.url)}:${f.lineNumber + 1}`;

const add = (m: Map<string, number>, k: string, v: number): void => void m.set(k, (m.get(k) ?? 0) + v);
const fn = new Map<string, number>();
const areas = new Map<string, number>();
const IDLE = new Set(['(idle)', '(program)']);
for (const [id, t] of self) {
  const f = byId.get(id)?.callFrame;
  if (!f || IDLE.has(f.functionName)) continue;
  add(fn, name(f), t);
  add(areas, area(f.url), t);
}
const busy = total - idle;
const pct = (t: number): string => `${((100 * t) / busy).toFixed(1).padStart(5)}%`;
const top = Number(values.top);
const print = (title: string, m: Map<string, number>): void => {
  process.stdout.write(`\n${title} (share of busy time ${(busy / 1000).toFixed(0)} ms)\n`);
  for (const [k, t] of [...m].sort((a, b) => b[1] - a[1]).slice(0, top)) process.stdout.write(`${pct(t)}  ${k}\n`);
};
print('Self time by area', areas);
print('Self time by function', fn);

if (values.focus) {
  // Inclusive time: a sample counts once for each focused frame on its stack.
  const inclusive = new Map<string, number>();
  const wanted = values.focus.split(',');
  profile.samples.forEach((id, i) => {
    const seen = new Set<string>();
    for (let cur: number | undefined = id; cur !== undefined; cur = parent.get(cur)) {
      const f = byId.get(cur)?.callFrame;
      if (!f) continue;
      for (const w of wanted) if (f.functionName === w || area(f.url) === w) seen.add(w);
    }
    for (const w of seen) add(inclusive, w, weight[i] ?? 0);
  });
  print('Inclusive time of focused frames', inclusive);
}
