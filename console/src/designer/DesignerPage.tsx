// /flows/new: pick a starter (?starter=fan-out), then design; /flows/{id}/edit: edit the flow's
// newest version, or ?version=N to make a new version from an older one.
import { useEffect, useState } from "react";
import { api, type Flow, type VersionDetail } from "../api";
import { onLink } from "../router";
import { DesignerView } from "./Designer";
import { fromGraph, type Doc } from "./model";
import { STARTERS } from "./starters";

function StarterPicker() {
  return (
    <div className="page">
      <h2>New flow</h2>
      <p>Start from a shape, then change it in the designer.</p>
      <div className="starters">
        {STARTERS.map((s) => (
          <a key={s.id} className="starter" data-testid={`starter-${s.id}`} href={`/flows/new?starter=${s.id}`} onClick={onLink}>
            <b>{s.title}</b>
            <span>{s.description}</span>
            <small>{s.graph.nodes.length} nodes</small>
          </a>
        ))}
      </div>
    </div>
  );
}

export function DesignerPage({ flowId, starter, version }: { flowId: string | null; starter: string | null; version: number | null }) {
  const [loaded, setLoaded] = useState<{ doc: Doc; version: number | null } | null>(null);
  const [problem, setProblem] = useState("");
  const chosen = STARTERS.find((s) => s.id === starter);

  useEffect(() => {
    if (!flowId) return;
    let live = true;
    (async () => {
      const flow = await api<Flow>(`/flows/${flowId}`);
      if (version !== null && version !== flow.version) {
        const old = await api<VersionDetail>(`/flows/${flowId}/versions/${version}`);
        return { doc: fromGraph(old.graph, flow.name), version };
      }
      return { doc: fromGraph(flow.graph, flow.name), version: flow.version };
    })().then((result) => live && setLoaded(result)).catch((e: Error) => live && setProblem(e.message));
    return () => { live = false; };
  }, [flowId, version]);

  if (!flowId && !chosen) return <StarterPicker />;
  if (problem) return <div className="page"><p className="error">{problem}</p></div>;
  if (flowId && !loaded) return <div className="page"><p>Loading…</p></div>;
  const initial = loaded?.doc ?? fromGraph(structuredClone(chosen!.graph), chosen!.id === "empty" ? "" : chosen!.title);
  return <DesignerView key={`${flowId ?? starter}@${loaded?.version ?? ""}`} initial={initial} flowId={flowId} version={loaded?.version ?? null} />;
}
