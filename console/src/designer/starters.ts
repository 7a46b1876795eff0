// Graphs a new flow can start from. Workers come without a webhook URL: the designer shows the
// server's complaint on each until one is filled in.
import type { Graph, GraphNode } from "../api";

export interface Starter { id: string; title: string; description: string; graph: Graph }

function node(id: string, type: string, x: number, y: number, data: Record<string, unknown> = {}): GraphNode {
  return { id, type, position: { x, y }, data };
}

function chain(...ids: string[]): Graph["edges"] {
  return ids.slice(1).map((target, i) => ({ id: `e-${ids[i]}-${target}`, source: ids[i], target }));
}

export const STARTERS: Starter[] = [
  {
    id: "empty", title: "Empty", description: "A blank canvas: drag nodes from the palette.",
    graph: { nodes: [], edges: [] },
  },
  {
    id: "worker-chain", title: "Worker chain", description: "Three Workers, each given the one before's output.",
    graph: {
      nodes: [node("fetch", "Worker", 0, 0), node("transform", "Worker", 260, 0), node("deliver", "Worker", 520, 0)],
      edges: chain("fetch", "transform", "deliver"),
    },
  },
  {
    id: "fan-out", title: "Fan-out", description: "A Worker, then a Splitter runs a Worker once per item, and a Collector gathers the results.",
    graph: {
      nodes: [
        node("load", "Worker", 0, 0), node("split", "Splitter", 260, 0, { arrayPath: "items" }),
        node("work", "Worker", 520, 0), node("gather", "Collector", 780, 0),
      ],
      edges: chain("load", "split", "work", "gather"),
      inputSchema: {
        type: "object", required: ["topic", "items"],
        properties: {
          topic: { type: "string", title: "Topic" },
          items: { type: "array", title: "Items", description: "One path per item.", items: { type: "string" }, default: ["a", "b", "c"] },
        },
      },
    },
  },
  {
    id: "approval", title: "Approval", description: "A Worker drafts, a person approves or rejects in a form, a Worker publishes.",
    graph: {
      nodes: [
        node("draft", "Worker", 0, 0),
        node("review", "UX", 260, 0, {
          prompt: "Approve the draft?",
          inputSchema: {
            type: "object", required: ["approved"],
            properties: {
              note: { type: "string", title: "Note" },
              approved: { type: "boolean", title: "Approved", "x-stitch-action": true },
            },
          },
        }),
        node("publish", "Worker", 520, 0),
      ],
      edges: chain("draft", "review", "publish"),
    },
  },
];
