// Two versions of a flow, compared (GET /flows/{id}/diff): the newer graph with its added nodes
// green, changed amber and moved outlined, and the removed ones drawn red where they were; edges
// the same way. The server says what changed; this only draws it.
import { useEffect, useState } from "react";
import { api, type FlowDiff, type Graph, type VersionDetail } from "./api";
import { Canvas, type DiffMark, type NodeView } from "./Canvas";

interface Drawn { graph: Graph; views: Record<string, NodeView>; edges: Record<string, DiffMark>; diff: FlowDiff }

function draw(diff: FlowDiff, before: Graph, after: Graph): Drawn {
  const removed = new Set(diff.nodes.removed);
  const gone = new Set(diff.edges.removed);
  const nodes = [...after.nodes, ...before.nodes.filter((n) => removed.has(n.id))];
  const present = new Set(nodes.map((n) => n.id));
  const edges = [...after.edges, ...before.edges.filter((e) => gone.has(e.id) && present.has(e.source) && present.has(e.target))];
  const views: Record<string, NodeView> = {};
  const moved = new Set(diff.nodes.moved);
  for (const id of diff.nodes.moved) views[id] = { diff: "moved", detail: "moved" };
  for (const c of diff.nodes.changed) views[c.id] = { diff: "changed", detail: `${c.fields.join(", ")}${moved.has(c.id) ? "; moved" : ""}` };
  for (const id of diff.nodes.added) views[id] = { diff: "added" };
  for (const id of diff.nodes.removed) views[id] = { diff: "removed" };
  const marks: Record<string, DiffMark> = {};
  for (const c of diff.edges.changed) marks[c.id] = "changed";
  for (const id of diff.edges.added) marks[id] = "added";
  for (const id of diff.edges.removed) marks[id] = "removed";
  return { graph: { ...after, nodes, edges }, views, edges: marks, diff };
}

function Listed({ label, ids, testId }: { label: string; ids: string[]; testId: string }) {
  if (!ids.length) return null;
  return <li data-testid={testId}><b>{label}</b> {ids.map((id) => <code key={id}>{id}</code>)}</li>;
}

export function DiffView({ flowId, from, to }: { flowId: string; from: number; to: number }) {
  const [drawn, setDrawn] = useState<Drawn | null>(null);
  const [problem, setProblem] = useState("");
  useEffect(() => {
    let live = true;
    setDrawn(null);
    Promise.all([
      api<FlowDiff>(`/flows/${flowId}/diff?from=${from}&to=${to}`),
      api<VersionDetail>(`/flows/${flowId}/versions/${from}`),
      api<VersionDetail>(`/flows/${flowId}/versions/${to}`),
    ]).then(([diff, a, b]) => live && setDrawn(draw(diff, a.graph, b.graph))).catch((e: Error) => live && setProblem(e.message));
    return () => { live = false; };
  }, [flowId, from, to]);

  if (problem) return <p className="error">{problem}</p>;
  if (!drawn) return <div className="canvas" data-testid="diff-canvas" />;
  const { diff } = drawn;
  const nothing = !diff.nodes.added.length && !diff.nodes.removed.length && !diff.nodes.changed.length && !diff.nodes.moved.length
    && !diff.edges.added.length && !diff.edges.removed.length && !diff.edges.changed.length;
  return (
    <section className="diff" data-testid="diff">
      <h3>Changes from v{from} to v{to}</h3>
      <div className="legend">
        {(["added", "removed", "changed", "moved"] as const).map((m) => <span key={m} className={`legend-item diff-${m}`}>{m}</span>)}
      </div>
      <Canvas graph={drawn.graph} views={drawn.views} edgeMarks={drawn.edges} testId="diff-canvas" ready />
      {nothing ? <p className="empty">The two versions' graphs are the same.</p> : (
        <ul className="diff-summary">
          <Listed label="Nodes added" ids={diff.nodes.added} testId="diff-nodes-added" />
          <Listed label="Nodes removed" ids={diff.nodes.removed} testId="diff-nodes-removed" />
          <Listed label="Nodes changed" ids={diff.nodes.changed.map((c) => `${c.id} (${c.fields.join(", ")})`)} testId="diff-nodes-changed" />
          <Listed label="Nodes moved" ids={diff.nodes.moved} testId="diff-nodes-moved" />
          <Listed label="Edges added" ids={diff.edges.added} testId="diff-edges-added" />
          <Listed label="Edges removed" ids={diff.edges.removed} testId="diff-edges-removed" />
          <Listed label="Edges changed" ids={diff.edges.changed.map((c) => `${c.id} (${c.fields.join(", ")})`)} testId="diff-edges-changed" />
        </ul>
      )}
    </section>
  );
}
