// Every gate waiting for a person, each with its form: complete them here without opening runs.
import { useCallback, useEffect, useState } from "react";
import { api, when, type Gate } from "./api";
import { GateForm } from "./GateForm";
import { onLink } from "./router";
import { useFlowNames } from "./useFlowNames";

export function WaitingPage() {
  const [gates, setGates] = useState<Gate[] | null>(null);
  const [problem, setProblem] = useState("");
  const [done, setDone] = useState<string[]>([]);
  const names = useFlowNames();
  const load = useCallback(() => {
    api<Gate[]>("/runs/waiting").then((g) => { setGates(g); setProblem(""); }).catch((e: Error) => setProblem(e.message));
  }, []);
  useEffect(load, [load]);

  return (
    <div className="page">
      <div className="toolbar">
        <h2>Waiting for a person</h2>
        <button data-testid="refresh-waiting" onClick={load}>Refresh</button>
      </div>
      {problem && <p className="error">{problem}</p>}
      {done.length > 0 && <p data-testid="completed-gates">Completed: {done.join(", ")}</p>}
      {gates?.length === 0 && <p className="empty" data-testid="no-gates">No gate is waiting.</p>}
      <div className="gates">
        {(gates ?? []).map((gate) => (
          <section key={`${gate.run_id}/${gate.node_id}`} className="gate" data-testid="waiting-gate" data-run-id={gate.run_id} data-node={gate.node_id}>
            <div className="toolbar">
              <h3>{gate.prompt ?? "This gate has no prompt."}</h3>
            </div>
            <p className="gate-meta">
              <a href={`/flows/${gate.flow_id}`} onClick={onLink}>{names[gate.flow_id] ?? gate.flow_id.slice(0, 8)}</a>
              {" · run "}<a href={`/runs/${gate.run_id}`} onClick={onLink}><code>{gate.run_id.slice(0, 8)}</code></a>
              {" · "}<code>{gate.node_id}</code>{gate.since && <> · waiting since {when(gate.since)}</>}
            </p>
            <GateForm runId={gate.run_id} nodeKey={gate.node_id} schema={gate.input_schema ?? null}
                      onDone={() => { setDone((d) => [...d, gate.node_id]); setGates((g) => (g ?? []).filter((x) => x !== gate)); }} />
          </section>
        ))}
      </div>
    </div>
  );
}
