// Where a node added from the palette goes: next to the selected node (or the last one), in the
// visible part of the canvas when there is room there, and never on top of another node. Pure:
// boxes in, a position out (the tests run it under Node as it is, so it imports nothing).

export interface Point { x: number; y: number }
export interface Box { x: number; y: number; width: number; height: number }

/** The size assumed for a node React Flow has not measured yet (a new one, or one never drawn). */
export const NODE_SIZE = { width: 180, height: 72 };
/** The space kept between a new node and any other. */
export const GAP = 40;

export interface Placing {
  boxes: Box[];  // every node on the canvas
  anchor: Box | null;  // the selected node, else the last node added; null on an empty canvas
  near: Point;  // where to start without an anchor (the middle of the view, or a drop point): the new node's centre
  view?: Box;  // the visible part of the canvas, in flow coordinates
  size?: { width: number; height: number };  // the new node's
}

function overlaps(a: Box, b: Box): boolean {
  const margin = GAP / 2;
  return a.x < b.x + b.width + margin && b.x < a.x + a.width + margin
    && a.y < b.y + b.height + margin && b.y < a.y + a.height + margin;
}

function inside(box: Box, view: Box): boolean {
  return box.x >= view.x && box.y >= view.y && box.x + box.width <= view.x + view.width && box.y + box.height <= view.y + view.height;
}

/** Offsets of a square ring `r` steps out, nearest first: the same row (right before left), then
 * the rows below before those above. */
function ring(r: number): [number, number][] {
  if (r === 0) return [[0, 0]];
  const cells: [number, number][] = [];
  for (let j = -r; j <= r; j++) for (let i = -r; i <= r; i++) if (Math.max(Math.abs(i), Math.abs(j)) === r) cells.push([i, j]);
  const cost = ([i, j]: [number, number]) => Math.abs(j) * 4 + (j < 0 ? 2 : 0) + Math.abs(i) * 3 + (i < 0 ? 1 : 0);
  return cells.sort((a, b) => cost(a) - cost(b));
}

/** The top-left corner for a new node: the first free spot, tried in order, of right of the
 * anchor, below it, above it, left of it, then rings of node-sized steps around the first of
 * them (or around `near` without an anchor). A spot inside `view` wins over one outside; some
 * free spot always exists, as the boxes are finite. */
export function placeNode({ boxes, anchor, near, view, size = NODE_SIZE }: Placing): Point {
  const free = (p: Point) => !boxes.some((b) => overlaps({ ...p, ...size }, b));
  const seen = (p: Point) => !view || inside({ ...p, ...size }, view);
  const first: Point[] = anchor ? [
    { x: anchor.x + anchor.width + GAP, y: anchor.y },
    { x: anchor.x, y: anchor.y + anchor.height + GAP },
    { x: anchor.x, y: anchor.y - size.height - GAP },
    { x: anchor.x - size.width - GAP, y: anchor.y },
  ] : [{ x: near.x - size.width / 2, y: near.y - size.height / 2 }];
  const origin = first[0];
  const stepX = size.width + GAP;
  const stepY = size.height + GAP;
  const reach = Math.max(2, Math.ceil(Math.max((view?.width ?? 0) / stepX, (view?.height ?? 0) / stepY)));
  let outside: Point | null = null;
  for (const p of first) {
    if (!free(p)) continue;
    if (seen(p)) return p;
    outside ??= p;
  }
  for (let r = 1; ; r++) {
    for (const [i, j] of ring(r)) {
      const p = { x: origin.x + i * stepX, y: origin.y + j * stepY };
      if (!free(p)) continue;
      if (seen(p)) return p;
      outside ??= p;
    }
    if (outside && r >= reach) return outside;  // no room in view: the nearest free spot beyond it
  }
}
