// What the designer draws: a node (its type's stripe, the server's problems as a badge), a ghost
// end for an edge whose node is missing, and an edge that shows its problems. Each is memoised
// and reads the problems from a context that changes only when the server answers, so a drag
// re-renders the dragged node alone.
import { BaseEdge, EdgeLabelRenderer, getBezierPath, Handle, Position, type EdgeProps, type NodeProps } from "@xyflow/react";
import { createContext, memo, useContext } from "react";
import type { Problem } from "../api";
import type { DesignEdge, DesignNode, GhostNode } from "./model";

/** A problem (or, `warning`, a warning) the server found, placed on its node or edge. */
export interface Mark extends Problem { warning: boolean }
export interface Marks { nodes: Map<string, Mark[]>; edges: Map<string, Mark[]> }
export const MarksContext = createContext<Marks>({ nodes: new Map(), edges: new Map() });

export function marksOf(problems: Problem[], warnings: Problem[]): Marks {
  const marks: Marks = { nodes: new Map(), edges: new Map() };
  const all = [...problems.map((p) => ({ ...p, warning: false })), ...warnings.map((p) => ({ ...p, warning: true }))];
  for (const m of all) {
    if (m.node_id) marks.nodes.set(m.node_id, [...(marks.nodes.get(m.node_id) ?? []), m]);
    if (m.edge_id) marks.edges.set(m.edge_id, [...(marks.edges.get(m.edge_id) ?? []), m]);
  }
  return marks;
}

function Badge({ marks, testId }: { marks: Mark[]; testId: string }) {
  const errors = marks.filter((m) => !m.warning).length;
  return (
    <span className={`problem-badge${errors ? "" : " warning"}`} data-testid={testId} data-rules={marks.map((m) => m.rule).join(" ")}
          title={marks.map((m) => `${m.warning ? "Warning: " : ""}${m.message}`).join("\n")}>
      {errors || "!"}
    </span>
  );
}

export const DesignNodeView = memo(function DesignNodeView({ id, data, selected }: NodeProps<DesignNode>) {
  const marks = useContext(MarksContext).nodes.get(id);
  const errors = marks?.filter((m) => !m.warning).length ?? 0;
  const label = typeof data.data.label === "string" && data.data.label ? data.data.label : id;
  return (
    <div className={`stitch-node design type-${data.kind}${errors ? " has-problem" : marks ? " has-warning" : ""}${selected ? " selected" : ""}`}
         data-testid={`node-${id}`} data-type={data.kind} data-problems={errors}>
      <Handle type="target" position={Position.Left} />
      <div className="node-kind">{data.kind === "UX" ? "UX gate" : data.kind}</div>
      <div className="node-label">{label}</div>
      {label !== id && <div className="node-id">{id}</div>}
      {marks && <Badge marks={marks} testId={`node-problem-${id}`} />}
      <Handle type="source" position={Position.Right} />
    </div>
  );
});

export const GhostNodeView = memo(function GhostNodeView({ id }: NodeProps<GhostNode>) {
  return (
    <div className="ghost-node" data-testid={`ghost-${id}`} title={`No node ${id}: connect this edge to a node, or delete it`}>
      <Handle type="target" position={Position.Left} isConnectable={false} />
      <span>missing {id}</span>
      <Handle type="source" position={Position.Right} isConnectable={false} />
    </div>
  );
});

export const DesignEdgeView = memo(function DesignEdgeView(props: EdgeProps<DesignEdge>) {
  const { id, sourceX, sourceY, targetX, targetY, sourcePosition, targetPosition, markerEnd, selected } = props;
  const marks = useContext(MarksContext).edges.get(id);
  const errors = marks?.some((m) => !m.warning);
  const [path, labelX, labelY] = getBezierPath({ sourceX, sourceY, targetX, targetY, sourcePosition, targetPosition });
  return (
    <>
      <BaseEdge id={id} path={path} markerEnd={markerEnd}
                style={errors ? { stroke: "var(--problem)", strokeWidth: 2.5, strokeDasharray: "6 4" } : selected ? { strokeWidth: 2.5 } : undefined} />
      {marks && (
        <EdgeLabelRenderer>
          <div className="edge-problem nodrag nopan" style={{ transform: `translate(-50%, -50%) translate(${labelX}px, ${labelY}px)` }}>
            <Badge marks={marks} testId={`edge-problem-${id}`} />
          </div>
        </EdgeLabelRenderer>
      )}
    </>
  );
});

export const nodeTypes = { design: DesignNodeView, ghost: GhostNodeView };
export const edgeTypes = { design: DesignEdgeView };
