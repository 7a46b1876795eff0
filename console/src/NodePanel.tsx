// The side panel of one node path (or a fan-out node with its paths): state, every attempt,
// and what a person can do: retry a failure, complete a waiting gate.
import { useEffect, useMemo, useState } from "react";
import { api, shown, when, type Attempt, type GraphNode, type NodeState } from "./api";
import { GateForm } from "./GateForm";

function pathOrder(a: string, b: string): number {
  const na = a.split("_").map(Number), nb = b.split("_").map(Number);
  for (let i = 0; i < Math.max(na.length, nb.length); i++) if ((na[i] ?? -1) !== (nb[i] ?? -1)) return (na[i] ?? -1) - (nb[i] ?? -1);
  return a.localeCompare(b);
}

export function NodePanel({ runId, nodeKey, state, states, graphNode, onSelect, onClose, onAct, onCompleted, actionError }: {
  runId: string; nodeKey: string; state: NodeState; states: Record<string, NodeState>; graphNode?: GraphNode;
  onSelect: (key: string) => void; onClose: () => void; onAct: (path: string, body?: unknown) => Promise<void>;
  onCompleted: () => void; actionError: string;
}) {
  const [attempts, setAttempts] = useState<Attempt[]>([]);
  const template = state.path === null;
  const paths = useMemo(() => (template
    ? Object.entries(states).filter(([, s]) => s.node_id === state.node_id && s.path !== null && s.path.length > 0)
        .sort(([a], [b]) => pathOrder(a.slice(state.node_id.length + 1), b.slice(state.node_id.length + 1)))
    : []), [template, states, state.node_id]);
  const failedPaths = paths.filter(([, s]) => s.status === "failed").length;

  useEffect(() => {
    let live = true;
    api<Attempt[]>(`/runs/${runId}/nodes/${encodeURIComponent(nodeKey)}/attempts`)
      .then((rows) => live && setAttempts(rows)).catch(() => live && setAttempts([]));
    return () => { live = false; };
  }, [runId, nodeKey, state.status, state.attempt]);

  const prompt = state.prompt ?? (typeof graphNode?.data?.prompt === "string" ? graphNode.data.prompt : null);
  return (
    <aside className="panel" data-testid="node-panel" data-key={nodeKey}>
      <div className="toolbar">
        <h3>{nodeKey} <small>{graphNode?.type}</small></h3>
        <button onClick={onClose} aria-label="Close">×</button>
      </div>
      <dl>
        <dt>Status</dt><dd><span className={`badge status-${state.status}`}>{state.status.replace(/_/g, " ")}</span></dd>
        {!template && <><dt>Attempt</dt><dd>{state.attempt}</dd></>}
        {state.updated_at && <><dt>Updated</dt><dd>{when(state.updated_at)}</dd></>}
        {state.fanout != null && <><dt>Paths opened</dt><dd>{state.fanout}</dd></>}
      </dl>
      {actionError && <pre className="error" data-testid="action-error">{actionError}</pre>}
      {(state.status === "failed" && !template) || (template && failedPaths > 0)
        ? <button data-testid="retry-node" onClick={() => void onAct(`/retry/${runId}/${encodeURIComponent(nodeKey)}`)}>
            {template ? `Retry ${failedPaths} failed path(s)` : "Retry"}</button>
        : null}
      {state.status === "waiting_for_user" && !template && (
        <div className="gate">
          <p data-testid="gate-prompt">{prompt ?? "This gate has no prompt."}</p>
          <GateForm runId={runId} nodeKey={nodeKey} schema={graphNode?.data?.inputSchema ?? null} onDone={onCompleted} />
        </div>
      )}
      {state.error && <><h4>Error</h4><pre className="error">{state.error}</pre></>}
      {!template && <><h4>Input</h4><pre>{shown(state.input) || "—"}</pre><h4>Output</h4><pre>{shown(state.output) || "—"}</pre></>}
      {template && (
        <>
          <h4>Paths ({paths.length})</h4>
          <ul className="paths">
            {paths.map(([key, s]) => (
              <li key={key} data-testid={`path-${key}`} data-status={s.status} className={`status-${s.status}`}
                  onClick={() => onSelect(key)}>{key} <small>{s.status.replace(/_/g, " ")}</small></li>
            ))}
          </ul>
        </>
      )}
      <h4>Attempts</h4>
      <table className="attempts">
        <thead><tr><th>Path</th><th>#</th><th>Status</th><th>Worker</th><th>Started</th><th>Finished</th></tr></thead>
        <tbody>
          {attempts.map((a) => (
            <tr key={`${a.node_key}/${a.attempt}`} data-testid="attempt-row" title={a.error ?? ""}>
              <td>{a.node_key}</td><td>{a.attempt}</td>
              <td><span className={`badge status-${a.status}`}>{a.status.replace(/_/g, " ")}</span>{a.error ? <div className="error">{a.error}</div> : null}</td>
              <td>{a.worker_status ?? ""}</td><td>{when(a.started_at)}</td><td>{when(a.finished_at)}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </aside>
  );
}
