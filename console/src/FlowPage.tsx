// One flow: its canvas, starting a run with a JSON input, exporting it, and its runs.
import { useEffect, useState } from "react";
import { api, type Flow, type Run } from "./api";
import { Canvas } from "./Canvas";
import { navigate } from "./router";
import { RunTable } from "./RunTable";

export function FlowPage({ id }: { id: string }) {
  const [flow, setFlow] = useState<Flow | null>(null);
  const [missing, setMissing] = useState("");
  const [input, setInput] = useState("{}");
  const [problem, setProblem] = useState("");
  const [starting, setStarting] = useState(false);

  useEffect(() => { api<Flow>(`/flows/${id}`).then(setFlow).catch((e: Error) => setMissing(e.message)); }, [id]);

  async function start() {
    let value: unknown;
    try { value = JSON.parse(input); } catch (e) { setProblem(`The input is not JSON: ${(e as Error).message}`); return; }
    setProblem("");
    setStarting(true);
    try {
      const run = await api<Run>(`/flows/${id}/runs`, { method: "POST", body: { input: value } });
      navigate(`/runs/${run.id}`);
    } catch (e) {
      setProblem((e as Error).message);
    } finally {
      setStarting(false);
    }
  }

  function exportFlow() {
    if (!flow) return;
    const blob = new Blob([JSON.stringify({ name: flow.name, graph: flow.graph }, null, 2)], { type: "application/json" });
    const link = document.createElement("a");
    link.href = URL.createObjectURL(blob);
    link.download = `${flow.name.replace(/[^\w.-]+/g, "_")}.json`;
    link.click();
    setTimeout(() => URL.revokeObjectURL(link.href), 1000);
  }

  if (missing) return <div className="page"><p className="error">{missing}</p></div>;
  if (!flow) return <div className="page"><p>Loading…</p></div>;
  return (
    <div className="page">
      <div className="toolbar">
        <h2>{flow.name} <small>version {flow.version} · {flow.graph.nodes.length} nodes</small></h2>
        <button data-testid="export-flow" onClick={exportFlow}>Export</button>
      </div>
      <Canvas graph={flow.graph} testId="flow-canvas" ready />
      <section className="start">
        <h3>Start a run</h3>
        <textarea data-testid="run-input" rows={4} value={input} onChange={(e) => setInput(e.target.value)} spellCheck={false} />
        {problem && <pre className="error" data-testid="run-input-error">{problem}</pre>}
        <button data-testid="start-run" disabled={starting} onClick={() => void start()}>Start run</button>
      </section>
      <RunTable flowId={flow.id} />
    </div>
  );
}
