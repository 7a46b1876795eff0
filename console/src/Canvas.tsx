// A flow's graph on a React Flow canvas, laid out as saved. On a run, each node carries its
// status (a colour) and a fan-out node the count of its paths per status; on a diff, whether it
// was added, removed, changed or moved. The view fits the graph again when the canvas is resized
// (a side panel opening or closing).
import { Background, Controls, Handle, Position, ReactFlow, useReactFlow, type Dimensions, type Node, type NodeChange, type NodeProps } from "@xyflow/react";
import { memo, useCallback, useEffect, useMemo, useRef, useState } from "react";
import type { Graph } from "./api";
import { layout } from "./designer/model";

export type DiffMark = "added" | "removed" | "changed" | "moved";
export interface NodeView { status?: string; counts?: Record<string, number>; diff?: DiffMark; detail?: string }
type StitchData = { label: string; kind: string; view?: NodeView };

function countsText(counts: Record<string, number>): string {
  return Object.entries(counts).filter(([, n]) => n > 0).map(([status, n]) => `${n} ${status.replace(/_/g, " ")}`).join(" · ");
}

const StitchNode = memo(function StitchNode({ id, data }: NodeProps<Node<StitchData>>) {
  const { kind, view } = data;
  return (
    <div className={`stitch-node type-${kind} status-${view?.status ?? "none"}${view?.diff ? ` diff-${view.diff}` : ""}`}
         data-testid={`node-${id}`} data-type={kind} data-status={view?.status} data-diff={view?.diff} title={view?.detail}>
      <Handle type="target" position={Position.Left} isConnectable={false} />
      <div className="node-kind">{kind === "UX" ? "UX gate" : kind}</div>
      <div className="node-label">{data.label}</div>
      {view?.status && <div className="node-status">{view.status.replace(/_/g, " ")}</div>}
      {view?.counts && <div className="fanout-counts" data-testid="fanout-counts">{countsText(view.counts)}</div>}
      {view?.diff && <div className="diff-tag">{view.diff}{view.detail ? `: ${view.detail}` : ""}</div>}
      <Handle type="source" position={Position.Right} isConnectable={false} />
    </div>
  );
});
const nodeTypes = { stitch: StitchNode };

/** Positions as saved; a graph saved without them (every node at one spot, as API clients often
 * send it) is laid out left to right by depth instead, so no node hides another. */
function positions(graph: Graph): Record<string, { x: number; y: number }> {
  const spots = new Set(graph.nodes.map((n) => `${n.position?.x ?? 0},${n.position?.y ?? 0}`));
  if (spots.size > 1 || graph.nodes.length < 2) {
    return Object.fromEntries(graph.nodes.map((n) => [n.id, n.position ?? { x: 0, y: 0 }]));
  }
  return layout(graph);
}

const FIT = { padding: 0.2, maxZoom: 1.2 };
const PRO = { hideAttribution: true };

/** Fits the graph in view again whenever the canvas changes size (not on the first measure). */
function FitOnResize() {
  const flow = useReactFlow();
  const box = useRef<HTMLDivElement>(null);
  useEffect(() => {
    const canvas = box.current?.closest(".canvas");
    if (!canvas) return;
    let width = canvas.clientWidth, frame = 0;
    const observer = new ResizeObserver(() => {
      if (canvas.clientWidth === width) return;
      width = canvas.clientWidth;
      cancelAnimationFrame(frame);
      frame = requestAnimationFrame(() => void flow.fitView(FIT));
    });
    observer.observe(canvas);
    return () => { observer.disconnect(); cancelAnimationFrame(frame); };
  }, [flow]);
  return <div ref={box} hidden />;
}

export function Canvas({ graph, views, edgeMarks, onSelect, testId, ready }: {
  graph: Graph; views?: Record<string, NodeView>; edgeMarks?: Record<string, DiffMark>; onSelect?: (nodeId: string) => void; testId: string; ready?: boolean;
}) {
  const placed = useMemo(() => positions(graph), [graph]);
  // Each node's measured size, handed back with it: a node React Flow gets anew (its status
  // changed) without its size is hidden until measured again, and may stay hidden.
  const sizes = useRef(new Map<string, Dimensions>());
  const [measuredAt, setMeasuredAt] = useState(0);
  const onNodesChange = useCallback((changes: NodeChange[]) => {
    let measured = false;
    for (const c of changes) {
      if (c.type === "dimensions" && c.dimensions) { sizes.current.set(c.id, c.dimensions); measured = true; }
    }
    if (measured) setMeasuredAt((n) => n + 1);
  }, []);
  const nodes = useMemo<Node<StitchData>[]>(() => graph.nodes.map((n) => ({
    id: n.id, type: "stitch", position: placed[n.id], measured: sizes.current.get(n.id),
    data: { label: String((n.data?.label as string | undefined) ?? n.id), kind: n.type, view: views?.[n.id] },
    draggable: false, connectable: false,
  })), [graph, views, placed, measuredAt]);
  const edges = useMemo(() => graph.edges.map((e) => ({
    id: e.id, source: e.source, target: e.target, animated: views?.[e.target]?.status === "running",
    className: edgeMarks?.[e.id] ? `diff-${edgeMarks[e.id]}` : undefined,
  })), [graph, views, edgeMarks]);
  return (
    <div className="canvas" data-testid={testId} data-ready={ready ? "true" : undefined}>
      <ReactFlow nodes={nodes} edges={edges} nodeTypes={nodeTypes} fitView fitViewOptions={FIT} onNodesChange={onNodesChange}
                 nodesDraggable={false} nodesConnectable={false} elementsSelectable={!!onSelect}
                 onNodeClick={(_, node) => onSelect?.(node.id)} proOptions={PRO}>
        <Background />
        <Controls showInteractive={false} />
        <FitOnResize />
      </ReactFlow>
    </div>
  );
}

export function Legend() {
  return (
    <div className="legend">
      {["pending", "running", "waiting_for_user", "retrying", "completed", "failed", "cancelled"].map((s) => (
        <span key={s} className={`legend-item status-${s}`}>{s.replace(/_/g, " ")}</span>
      ))}
    </div>
  );
}
