// The flows (with their last run), a new flow in the designer, importing a flow from a graph
// file (kept as it is: positions, viewport, every key), and gates waiting for a person.
import { useEffect, useState } from "react";
import { api, readFlowFile, when, type Flow, type Gate } from "./api";
import { onLink } from "./router";

export function FlowsPage() {
  const [flows, setFlows] = useState<Flow[] | null>(null);
  const [gates, setGates] = useState<Gate[]>([]);
  const [problem, setProblem] = useState("");
  const [reload, setReload] = useState(0);

  useEffect(() => {
    api<Flow[]>("/flows").then(setFlows).catch((e: Error) => setProblem(e.message));
    api<Gate[]>("/runs/waiting").then(setGates).catch(() => setGates([]));
  }, [reload]);

  async function importFile(file: File) {
    setProblem("");
    try {
      await api<Flow>("/flows", { method: "POST", body: readFlowFile(await file.text(), file.name) });
      setReload((n) => n + 1);
    } catch (e) {
      setProblem((e as Error).message);
    }
  }

  return (
    <div className="page">
      <section>
        <div className="toolbar">
          <h2>Flows</h2>
          <a className="button primary" href="/flows/new" onClick={onLink} data-testid="new-flow">New flow</a>
          <label className="button">Import flow…
            <input type="file" accept=".json,application/json" data-testid="import-flow" hidden
                   onChange={(e) => { const f = e.target.files?.[0]; e.target.value = ""; if (f) void importFile(f); }} />
          </label>
        </div>
        {problem && <pre className="error" data-testid="import-error">{problem}</pre>}
        <table>
          <thead><tr><th>Name</th><th>Nodes</th><th>Last run</th><th>Updated</th></tr></thead>
          <tbody>
            {(flows ?? []).map((flow) => (
              <tr key={flow.id} data-testid="flow-row" data-flow-id={flow.id}>
                <td><a href={`/flows/${flow.id}`} onClick={onLink}>{flow.name}</a></td>
                <td>{flow.node_count ?? flow.graph.nodes.length}</td>
                <td>{flow.last_run
                  ? <a href={`/runs/${flow.last_run.id}`} onClick={onLink}><span className={`badge status-${flow.last_run.status}`}>{flow.last_run.status.replace(/_/g, " ")}</span> {when(flow.last_run.created_at)}</a>
                  : "never"}</td>
                <td>{when(flow.updated_at)}</td>
              </tr>
            ))}
            {flows?.length === 0 && <tr><td colSpan={4} className="empty">No flows yet: design one (New flow), import a graph JSON file, or POST /api/stitch/flows.</td></tr>}
          </tbody>
        </table>
      </section>
      {gates.length > 0 && (
        <section>
          <div className="toolbar">
            <h2>Waiting for a person</h2>
            <a href="/runs/waiting" onClick={onLink} data-testid="open-waiting">Complete them →</a>
          </div>
          <table>
            <thead><tr><th>Flow</th><th>Run</th><th>Gate</th><th>Prompt</th><th>Since</th></tr></thead>
            <tbody>
              {gates.map((gate) => (
                <tr key={`${gate.run_id}/${gate.node_id}`} data-testid="waiting-gate">
                  <td>{flows?.find((f) => f.id === gate.flow_id)?.name ?? gate.flow_id.slice(0, 8)}</td>
                  <td><a href={`/runs/${gate.run_id}`} onClick={onLink}><code>{gate.run_id.slice(0, 8)}</code></a></td>
                  <td>{gate.node_id}</td><td>{gate.prompt}</td><td>{when(gate.since)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </section>
      )}
    </div>
  );
}
