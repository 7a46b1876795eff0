// One flow: the graph of the version chosen (the newest by default) with Edit to open the
// designer, its versions and the changes between two, starting a run (a form from the flow's
// input schema), exporting it, and its runs. The version shown and the comparison are in the
// address (?version=N, ?from=A&to=B).
import { useEffect, useState } from "react";
import { api, download, type Flow, type FlowVersion, type Graph, type VersionDetail } from "./api";
import { Canvas } from "./Canvas";
import { DiffView } from "./DiffView";
import { navigate, onLink, useLocation } from "./router";
import { RunTable } from "./RunTable";
import { StartRun } from "./StartRun";
import { VersionsPanel } from "./VersionsPanel";

function numberOf(text: string | null): number | null {
  return text !== null && /^\d+$/.test(text) ? Number(text) : null;
}

export function FlowPage({ id }: { id: string }) {
  const { query } = useLocation();
  const asked = numberOf(query.get("version"));
  const from = numberOf(query.get("from"));
  const to = numberOf(query.get("to"));
  const [flow, setFlow] = useState<Flow | null>(null);
  const [missing, setMissing] = useState("");
  const [versions, setVersions] = useState<FlowVersion[] | null>(null);
  const [versionsProblem, setVersionsProblem] = useState("");
  const [old, setOld] = useState<VersionDetail | null>(null);

  useEffect(() => { api<Flow>(`/flows/${id}`).then(setFlow).catch((e: Error) => setMissing(e.message)); }, [id]);
  useEffect(() => {
    api<FlowVersion[]>(`/flows/${id}/versions`).then(setVersions).catch((e: Error) => setVersionsProblem(`Versions: ${e.message}`));
  }, [id]);
  const shownVersion = asked ?? flow?.version ?? null;
  useEffect(() => {
    if (!flow || asked === null || asked === flow.version) { setOld(null); return; }
    let live = true;
    api<VersionDetail>(`/flows/${id}/versions/${asked}`).then((v) => live && setOld(v)).catch((e: Error) => live && setMissing(e.message));
    return () => { live = false; };
  }, [id, flow, asked]);

  if (missing) return <div className="page"><p className="error">{missing}</p></div>;
  if (!flow) return <div className="page"><p>Loading…</p></div>;
  const newest = shownVersion === flow.version;
  const graph: Graph | null = newest ? flow.graph : old?.graph ?? null;
  const name = newest ? flow.name : old?.name ?? flow.name;
  const comparing = from !== null && to !== null;
  return (
    <div className="page">
      <div className="toolbar">
        <h2 data-testid="flow-title">{name} <small>version {shownVersion}{newest ? "" : ` (newest: ${flow.version})`} · {graph?.nodes.length ?? "…"} nodes</small></h2>
        {comparing && <a href={`/flows/${id}`} onClick={onLink} data-testid="close-diff">Back to the graph</a>}
        <a className="button" data-testid="edit-flow" href={`/flows/${id}/edit${newest ? "" : `?version=${shownVersion}`}`} onClick={onLink}>
          {newest ? "Edit" : `Edit from v${shownVersion}`}
        </a>
        <button data-testid="export-flow" disabled={!graph} onClick={() => graph && download({ name, graph }, name)}>Export</button>
      </div>
      {comparing
        ? <DiffView flowId={id} from={from} to={to} />
        : graph ? <Canvas key={shownVersion} graph={graph} testId="flow-canvas" ready /> : <div className="canvas" data-testid="flow-canvas" />}
      <VersionsPanel versions={versions} shown={comparing ? null : shownVersion} problem={versionsProblem}
                     onView={(v) => navigate(v === flow.version ? `/flows/${id}` : `/flows/${id}?version=${v}`)}
                     onCompare={(a, b) => navigate(`/flows/${id}?from=${a}&to=${b}`)} />
      <StartRun flowId={flow.id} schema={flow.graph.inputSchema} />
      <RunTable flowId={flow.id} />
    </div>
  );
}
