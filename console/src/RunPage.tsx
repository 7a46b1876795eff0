// One run, live: the canvas coloured by node status, the selected node's details and actions,
// and the event timeline. Events from the run's stream colour nodes at once; the run view is
// fetched again (debounced) to learn new fan-out paths, outputs and errors.
import { useCallback, useEffect, useMemo, useRef, useState } from "react";
import { api, follow, when, type Flow, type Run, type RunEvent, type NodeState } from "./api";
import { Canvas, Legend, type NodeView } from "./Canvas";
import { NodePanel } from "./NodePanel";
import { onLink } from "./router";

const TIMELINE = 300;  // events shown, newest first

/** A fan-out node's status from its paths: what a person should look at first. */
function summary(counts: Record<string, number>, own: string): string {
  const has = (s: string) => (counts[s] ?? 0) > 0;
  if (Object.keys(counts).length === 0) return own;
  for (const s of ["failed", "waiting_for_user", "running", "retrying", "pending"]) if (has(s)) return s;
  return has("cancelled") ? "cancelled" : "completed";
}

export function RunPage({ id }: { id: string }) {
  const [run, setRun] = useState<Run | null>(null);
  const [states, setStates] = useState<Record<string, NodeState>>({});
  const [events, setEvents] = useState<RunEvent[]>([]);
  const [missing, setMissing] = useState("");
  const [selected, setSelected] = useState<string | null>(null);
  const [actionError, setActionError] = useState("");
  const [flowName, setFlowName] = useState<string | null>(null);
  const lastEvent = useRef<number | null>(null);
  const timer = useRef<number | undefined>(undefined);
  const firstQueued = useRef<number | null>(null);

  const load = useCallback(async () => {
    const view = await api<Run>(`/runs/${id}`);
    setRun(view);
    setStates(view.node_states);
  }, [id]);

  const refetchSoon = useCallback(() => {
    const now = Date.now();
    firstQueued.current ??= now;
    window.clearTimeout(timer.current);
    const wait = now - firstQueued.current > 1000 ? 0 : 200;  // quiet for 200 ms, or at least once a second
    timer.current = window.setTimeout(() => { firstQueued.current = null; void load().catch(() => {}); }, wait);
  }, [load]);

  useEffect(() => {
    let stop = () => {};
    let live = true;
    setRun(null); setEvents([]); setSelected(null); lastEvent.current = null;
    (async () => {
      try {
        const [log] = await Promise.all([api<RunEvent[]>(`/runs/${id}/events`), load()]);  // the stream replays what either missed
        if (!live) return;
        setEvents(log);
        lastEvent.current = log.length ? log[log.length - 1].id : 0;
        stop = follow(`/runs/${id}/stream`, (message) => {
          const event = message.data as RunEvent;
          lastEvent.current = Math.max(lastEvent.current ?? 0, event.id);
          setEvents((shownEvents) => (shownEvents.some((e) => e.id === event.id) ? shownEvents : [...shownEvents, event]));
          setStates((current) => {
            const state = current[event.node_key];  // a key not known yet (a new path) comes with the refetch
            return state ? { ...current, [event.node_key]: { ...state, status: event.status, attempt: event.attempt, error: event.error ?? null } } : current;
          });
          if (event.run_status) setRun((r) => (r && r.status !== event.run_status ? { ...r, status: event.run_status! } : r));
          refetchSoon();
        }, () => lastEvent.current);
      } catch (e) {
        if (live) setMissing((e as Error).message);
      }
    })();
    return () => { live = false; stop(); window.clearTimeout(timer.current); };
  }, [id, load, refetchSoon]);

  const flowId = run?.flow_id;
  useEffect(() => {
    if (!flowId) return;
    let live = true;
    api<Flow>(`/flows/${flowId}`).then((f) => live && setFlowName(f.name)).catch(() => {});  // a deleted flow: its id
    return () => { live = false; };
  }, [flowId]);

  const views = useMemo(() => {
    const out: Record<string, NodeView> = {};
    if (!run) return out;
    const counts: Record<string, Record<string, number>> = {};
    for (const state of Object.values(states)) {
      if (state.path && state.path.length > 0) {
        const c = (counts[state.node_id] ??= {});
        c[state.status] = (c[state.status] ?? 0) + 1;
      }
    }
    for (const node of run.graph.nodes) {
      const own = states[node.id];
      if (own && own.path === null) {
        const c = counts[node.id] ?? {};
        out[node.id] = { status: summary(c, own.status), counts: c };
      } else {
        out[node.id] = { status: own?.status ?? "pending" };
      }
    }
    return out;
  }, [run, states]);

  async function act(path: string, body?: unknown) {
    setActionError("");
    try {
      await api(path, { method: "POST", body });
      refetchSoon();
    } catch (e) {
      setActionError((e as Error).message);
    }
  }

  if (missing) return <div className="page"><p className="error">{missing}</p></div>;
  if (!run) return <div className="page"><p>Loading…</p><div className="canvas" data-testid="run-canvas" /></div>;
  return (
    <div className="page run-page">
      <div className="toolbar">
        <h2>Run <code>{run.id.slice(0, 8)}</code>{" "}
          <span className={`badge status-${run.status}`} data-testid="run-status" data-status={run.status}>{run.status.replace(/_/g, " ")}</span>
        </h2>
        <span>flow <a href={`/flows/${run.flow_id}`} onClick={onLink} data-testid="run-flow">{flowName ?? run.flow_id.slice(0, 8)}</a> version {run.flow_version}
          {" · "}started {when(run.created_at)} · updated {when(run.updated_at)}</span>
        {(run.status === "running" || run.status === "waiting_for_user") &&
          <button className="danger" data-testid="cancel-run" onClick={() => void act(`/runs/${id}/cancel`)}>Cancel run</button>}
      </div>
      {actionError && !selected && <pre className="error" data-testid="action-error">{actionError}</pre>}
      <Legend />
      <div className="run-body">
        <Canvas graph={run.graph} views={views} testId="run-canvas" ready onSelect={(nodeId) => { setSelected(nodeId); setActionError(""); }} />
        {selected && states[selected] && (
          <NodePanel runId={id} nodeKey={selected} state={states[selected]} states={states}
                     graphNode={run.graph.nodes.find((n) => n.id === states[selected].node_id)}
                     onSelect={(key) => { setSelected(key); setActionError(""); }} onClose={() => setSelected(null)}
                     onAct={act} onCompleted={refetchSoon} actionError={actionError} />
        )}
      </div>
      <section>
        <h3>Timeline</h3>
        <table className="timeline">
          <thead><tr><th>Time</th><th>Node</th><th>Status</th><th>Attempt</th><th>Detail</th></tr></thead>
          <tbody>
            {events.slice(-TIMELINE).reverse().map((event) => (
              <tr key={event.id} data-testid="timeline-event">
                <td>{when(event.at)}</td><td>{event.node_key}</td>
                <td><span className={`badge status-${event.status}`}>{event.status.replace(/_/g, " ")}</span></td>
                <td>{event.attempt}</td><td className="detail">{event.error ?? event.summary ?? ""}</td>
              </tr>
            ))}
          </tbody>
        </table>
        {events.length > TIMELINE && <p className="empty">The newest {TIMELINE} of {events.length} events.</p>}
      </section>
    </div>
  );
}
