// The designer's document: React Flow nodes and edges, each holding every key of the node or
// edge it was loaded from, so a graph saves back exactly as it came but for what was edited.
// An edge may point at a node that is not there (its node was deleted, or it was dropped on the
// empty canvas): it is drawn to a ghost end, and saved pointing at the missing id, as the server
// validates it. Ghosts are never saved as nodes.
import type { Edge, Node } from "@xyflow/react";
import type { Graph, GraphEdge, GraphNode, NodeKind, XY } from "../api";

export type DataMap = Record<string, unknown>;
export interface DesignData extends Record<string, unknown> {
  kind: string;  // the Stitch type: Worker, UX, Splitter, Collector (anything else is kept for the server to name)
  data: DataMap;
  extra: DataMap;  // the node's other keys as loaded (React Flow's width, style, ...), saved back untouched
}
export type DesignNode = Node<DesignData, "design">;
/** The missing end of an edge, drawn where its node was (or where the connection was dropped). */
export type GhostNode = Node<Record<string, never>, "ghost">;
export type AnyNode = DesignNode | GhostNode;
export interface EdgeExtra extends Record<string, unknown> { extra: DataMap }
export type DesignEdge = Edge<EdgeExtra>;
export interface Doc {
  nodes: AnyNode[];  // ghosts among them, never saved
  edges: DesignEdge[];
  name: string;
  rest: DataMap;  // the graph's other keys: inputSchema, viewport, anything a React Flow app saved
}

export function isDesign(node: AnyNode): node is DesignNode {
  return node.type === "design";
}

const NODE_KEYS = new Set(["id", "type", "data"]);
const EDGE_KEYS = new Set(["id", "source", "target"]);

function isXY(value: unknown): value is XY {
  return typeof value === "object" && value !== null && typeof (value as XY).x === "number" && typeof (value as XY).y === "number";
}

function without(value: object, keys: Set<string>): DataMap {
  return Object.fromEntries(Object.entries(value).filter(([key]) => !keys.has(key)));
}

/** Where nodes saved without positions go: left to right by depth. */
export function layout(graph: Graph): Record<string, XY> {
  const depth: Record<string, number> = {};
  const parents = new Map<string, string[]>();
  for (const e of graph.edges ?? []) parents.set(e.target, [...(parents.get(e.target) ?? []), e.source]);
  const depthOf = (id: string, seen: Set<string>): number => {
    if (depth[id] !== undefined) return depth[id];
    if (seen.has(id)) return 0;
    seen.add(id);
    const up = parents.get(id) ?? [];
    return (depth[id] = up.length ? 1 + Math.max(...up.map((p) => depthOf(p, seen))) : 0);
  };
  const rows: Record<number, number> = {};
  return Object.fromEntries(graph.nodes.map((n) => {
    const d = depthOf(n.id, new Set());
    const row = (rows[d] = (rows[d] ?? -1) + 1);
    return [n.id, { x: 240 * d, y: 110 * row }];
  }));
}

export function designNode(node: GraphNode, at: XY): DesignNode {
  const data = typeof node.data === "object" && node.data !== null && !Array.isArray(node.data) ? node.data : {};
  return { id: String(node.id), type: "design", position: at, data: { kind: String(node.type), data, extra: without(node, NODE_KEYS) } };
}

export function designEdge(edge: GraphEdge): DesignEdge {
  return { id: String(edge.id), source: String(edge.source), target: String(edge.target), type: "design", data: { extra: without(edge, EDGE_KEYS) } };
}

export function ghost(id: string, at: XY): GhostNode {
  return { id, type: "ghost", position: at, data: {} };
}

/** A saved graph (as the server or a file gives it) as a document. */
export function fromGraph(graph: Graph, name: string): Doc {
  const nodes = Array.isArray(graph.nodes) ? graph.nodes : [];
  const edges = Array.isArray(graph.edges) ? graph.edges : [];
  const spots = new Set(nodes.map((n) => (isXY(n.position) ? `${n.position.x},${n.position.y}` : "none")));
  const placed = spots.size > 1 || nodes.length < 2 ? null : layout({ ...graph, nodes, edges });
  return settle({
    nodes: nodes.map((n) => designNode(n, placed?.[n.id] ?? (isXY(n.position) ? { x: n.position.x, y: n.position.y } : { x: 0, y: 0 }))),
    edges: edges.map(designEdge),
    name,
    rest: without(graph, new Set(["nodes", "edges"])),
  });
}

/** The graph to save: every loaded key kept, positions as drawn, edges to missing ids as they are. */
export function toGraph(doc: Doc): Graph {
  return {
    ...doc.rest,
    nodes: doc.nodes.filter(isDesign).map((n) => {
      const { extra, kind, data } = n.data;
      const position = { ...(isXY(extra.position) ? extra.position : {}), x: n.position.x, y: n.position.y };
      return { ...extra, id: n.id, type: kind, position, data };  // as the server stores it: position and data always
    }),
    edges: doc.edges.map((e) => ({ ...(e.data?.extra ?? {}), id: e.id, source: e.source, target: e.target })),
  };
}

/** The document with a ghost at every edge end that is no node, and no ghost that no edge needs. */
export function settle(doc: Doc): Doc {
  const ends = new Set(doc.edges.flatMap((e) => [e.source, e.target]));
  const present = new Map(doc.nodes.map((n) => [n.id, n]));
  const kept = doc.nodes.filter((n) => isDesign(n) || ends.has(n.id));
  const added: GhostNode[] = [];
  for (const e of doc.edges) {
    for (const [end, other, dx] of [[e.source, e.target, -220], [e.target, e.source, 220]] as const) {
      if (present.has(end)) continue;
      const near = present.get(other)?.position;
      const spot = ghost(end, near ? { x: near.x + dx, y: near.y } : { x: 0, y: 0 });
      present.set(end, spot);
      added.push(spot);
    }
  }
  return kept.length === doc.nodes.length && added.length === 0 ? doc : { ...doc, nodes: [...kept, ...added] };
}

/** An id of the form `${stem}${n}` that no node (ghosts too) and no edge end uses. */
export function freshId(stem: string, doc: Pick<Doc, "nodes" | "edges">, taken: Set<string> = new Set()): string {
  const used = new Set([...doc.nodes.map((n) => n.id), ...doc.edges.flatMap((e) => [e.source, e.target]), ...taken]);
  for (let i = 1; ; i++) if (!used.has(`${stem}${i}`)) return `${stem}${i}`;
}

export function freshEdgeId(source: string, target: string, edges: DesignEdge[]): string {
  const used = new Set(edges.map((e) => e.id));
  const stem = `e-${source}-${target}`;
  if (!used.has(stem)) return stem;
  for (let i = 2; ; i++) if (!used.has(`${stem}-${i}`)) return `${stem}-${i}`;
}

export function newNode(kind: NodeKind, id: string, at: XY): DesignNode {
  const data: DataMap = kind === "Splitter" ? { arrayPath: "items" } : {};
  return { id, type: "design", position: at, selected: true, data: { kind, data, extra: {} } };
}

export function newEdge(source: string, target: string, edges: DesignEdge[]): DesignEdge {
  return { id: freshEdgeId(source, target, edges), source, target, type: "design", data: { extra: {} } };
}

/** The kind's id stem: worker1, ux1, splitter1, collector1 (no `_n` suffix: those are fan-out paths). */
export function stemOf(kind: string): string {
  return kind.toLowerCase().replace(/[^a-z0-9]/g, "") || "node";
}
