// The console's placement of a new palette node (console/src/designer/placement.ts), run by
// Node's test runner on the TypeScript source as it is (test_console_placement.py starts it).
import assert from "node:assert/strict";
import test from "node:test";
import { GAP, NODE_SIZE, placeNode } from "../../console/src/designer/placement.ts";

const size = NODE_SIZE;
const box = (p) => ({ ...p, ...size });
function apart(a, b) {
  return a.x + a.width <= b.x || b.x + b.width <= a.x || a.y + a.height <= b.y || b.y + b.height <= a.y;
}
const view = { x: -500, y: -300, width: 1000, height: 600 };

test("an empty canvas: the new node is centred on the point given", () => {
  assert.deepEqual(placeNode({ boxes: [], anchor: null, near: { x: 10, y: 20 }, view }), { x: 10 - size.width / 2, y: 20 - size.height / 2 });
});

test("next to the anchor: to its right, a gap apart, on its row", () => {
  const anchor = box({ x: 0, y: 0 });
  assert.deepEqual(placeNode({ boxes: [anchor], anchor, near: { x: 0, y: 0 }, view }), { x: size.width + GAP, y: 0 });
});

test("clicks in a row give nodes that never overlap and stay in view", () => {
  const boxes = [];
  let anchor = null;
  for (let i = 0; i < 40; i++) {
    const p = placeNode({ boxes, anchor, near: { x: 0, y: 0 }, view });
    const placed = box(p);
    for (const other of boxes) assert.ok(apart(placed, other), `node ${i} at ${JSON.stringify(p)} overlaps ${JSON.stringify(other)}`);
    if (i < 12) assert.ok(placed.x >= view.x && placed.x + placed.width <= view.x + view.width && placed.y >= view.y && placed.y + placed.height <= view.y + view.height, `node ${i} out of view`);
    boxes.push(placed);
    anchor = placed;
  }
});

test("a taken spot right of the anchor: the next free one, below it", () => {
  const anchor = box({ x: 0, y: 0 });
  const right = box({ x: size.width + GAP, y: 0 });
  assert.deepEqual(placeNode({ boxes: [anchor, right], anchor, near: { x: 0, y: 0 }, view }), { x: 0, y: size.height + GAP });
});

test("a drop on top of a node moves the new one beside it; a drop on free space stays", () => {
  const there = box({ x: 0, y: 0 });
  const dropped = placeNode({ boxes: [there], anchor: null, near: { x: 30, y: 30 }, view });
  assert.ok(apart(box(dropped), there));
  const free = placeNode({ boxes: [there], anchor: null, near: { x: 400, y: 200 }, view });
  assert.deepEqual(free, { x: 400 - size.width / 2, y: 200 - size.height / 2 });
});

test("no room in view: a free spot beyond it, never on a node", () => {
  const small = { x: 0, y: 0, width: size.width + 10, height: size.height + 10 };
  const anchor = box({ x: 0, y: 0 });
  const p = placeNode({ boxes: [anchor], anchor, near: { x: 0, y: 0 }, view: small });
  assert.ok(apart(box(p), anchor));
});

test("measured sizes count: a wide node pushes the next one further right", () => {
  const wide = { x: 0, y: 0, width: 600, height: 90 };
  assert.deepEqual(placeNode({ boxes: [wide], anchor: wide, near: { x: 0, y: 0 } }), { x: 600 + GAP, y: 0 });
});
