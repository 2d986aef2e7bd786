import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { OpenStreams } from './admission.ts';
import { defaultMaxOpenStreams, descriptorLimit } from './descriptors.ts';

test('DESIGN §16: OpenStreams admits MAX_OPEN_STREAMS, refuses the next, frees a slot once per release; the 80 % warning once per crossing', () => {
  const gauge: number[] = [];
  const warnings: number[] = [];
  const slots = new OpenStreams(
    10,
    (n) => gauge.push(n),
    (n) => warnings.push(n),
  );
  const held = Array.from({ length: 10 }, () => slots.take());
  assert.ok(held.every((r) => r !== null));
  assert.equal(slots.take(), null);
  assert.deepEqual(warnings, [8]);
  held[0]?.();
  held[0]?.();
  assert.equal(slots.open, 9);
  // Down to 80 %, not below 75 %: no new warning on the way back up.
  held[1]?.();
  assert.ok(slots.take() !== null);
  assert.deepEqual(warnings, [8]);
  // Below 75 %, then at 80 % again: warned again.
  for (const r of held.slice(2, 6)) r?.();
  assert.equal(slots.open, 5);
  slots.take();
  slots.take();
  slots.take();
  assert.deepEqual(warnings, [8, 8]);
  assert.equal(gauge.at(-1), 8);
});

test('DESIGN §16: MAX_OPEN_STREAMS by default = (RLIMIT_NOFILE − 128 − pool) / 2, from /proc/self/limits', () => {
  assert.equal(defaultMaxOpenStreams(20_000, 20), 9926);
  assert.equal(defaultMaxOpenStreams(100, 20), 1);
  assert.equal(defaultMaxOpenStreams(undefined, 20), 1974);
  const dir = mkdtempSync(path.join(os.tmpdir(), 'limits-'));
  try {
    const file = path.join(dir, 'limits');
    writeFileSync(
      file,
      'Limit                     Soft Limit           Hard Limit           Units\nMax open files            20000                20000                files\n',
    );
    assert.equal(descriptorLimit(file), 20_000);
    writeFileSync(file, 'Max open files            unlimited            unlimited            files\n');
    assert.equal(descriptorLimit(file), undefined);
    assert.equal(descriptorLimit(path.join(dir, 'missing')), undefined);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
