// Runs, newest first, a page at a time, filtered by status, kept current by the run-list stream.
import { useEffect, useState } from "react";
import { api, follow, RUN_STATUSES, when, type RunSummary } from "./api";
import { onLink } from "./router";

const PAGE = 25;

type Retention = { max_age_hours: number | null; max_runs_per_flow: number | null };

// "Finished runs are kept 14 days, at most 10,000 per flow", from the server's STITCH_RETENTION_*.
export function retentionLine(retention: Retention | null): string {
  if (!retention) return "Finished runs are kept until deleted.";
  const parts: string[] = [];
  const hours = retention.max_age_hours;
  if (hours !== null) {
    const days = hours / 24;
    parts.push(Number.isInteger(days) ? `${days} ${days === 1 ? "day" : "days"}` : `${+hours.toFixed(2)} ${hours === 1 ? "hour" : "hours"}`);
  }
  if (retention.max_runs_per_flow !== null) {
    parts.push(`at most ${retention.max_runs_per_flow.toLocaleString("en-US")} per flow`);
  }
  return `Finished runs are kept ${parts.join(", ")}.`;
}

export function RunTable({ flowId, flowNames }: { flowId?: string; flowNames?: Record<string, string> }) {
  const [status, setStatus] = useState("");
  const [cursors, setCursors] = useState<(string | null)[]>([null]);  // the cursor of each page seen
  const [runs, setRuns] = useState<RunSummary[]>([]);
  const [next, setNext] = useState<string | null>(null);
  const [error, setError] = useState("");
  const [retention, setRetention] = useState<Retention | null | undefined>(undefined);  // undefined: not read yet
  const cursor = cursors[cursors.length - 1];
  const firstPage = cursors.length === 1;

  useEffect(() => {
    const query = new URLSearchParams({ limit: String(PAGE) });
    if (flowId) query.set("flow_id", flowId);
    if (status) query.set("status", status);
    if (cursor) query.set("cursor", cursor);
    let live = true;
    api<{ runs: RunSummary[]; next_cursor: string | null; retention: Retention | null }>(`/runs?${query}`)
      .then((page) => { if (live) { setRuns(page.runs); setNext(page.next_cursor); setRetention(page.retention); setError(""); } })
      .catch((e: Error) => live && setError(e.message));
    return () => { live = false; };
  }, [flowId, status, cursor]);

  useEffect(() => follow(`/runs/stream${flowId ? `?flow_id=${flowId}` : ""}`, (message) => {
    const run = message.data as RunSummary;
    setRuns((shownRuns) => {
      const at = shownRuns.findIndex((r) => r.id === run.id);
      if (at >= 0) {
        const updated = status && run.status !== status ? shownRuns.filter((r) => r.id !== run.id) : shownRuns.map((r) => (r.id === run.id ? run : r));
        return updated;
      }
      if (!firstPage || (status && run.status !== status)) return shownRuns;
      return [run, ...shownRuns].slice(0, PAGE);  // a new run: newest first
    });
  }), [flowId, status, firstPage]);

  return (
    <section className="runs">
      <div className="toolbar">
        <h2>Runs</h2>
        <label>Status{" "}
          <select data-testid="status-filter" value={status} onChange={(e) => { setStatus(e.target.value); setCursors([null]); }}>
            <option value="">all</option>
            {RUN_STATUSES.map((s) => <option key={s} value={s}>{s.replace(/_/g, " ")}</option>)}
          </select>
        </label>
        <button data-testid="prev-page" disabled={firstPage} onClick={() => setCursors(cursors.slice(0, -1))}>← Newer</button>
        <button data-testid="next-page" disabled={!next} onClick={() => next && setCursors([...cursors, next])}>Older →</button>
      </div>
      {error && <p className="error">{error}</p>}
      {flowId && retention !== undefined && <p className="retention" data-testid="retention">{retentionLine(retention)}</p>}
      <table>
        <thead><tr><th>Run</th>{!flowId && <th>Flow</th>}<th>Status</th><th>Started</th><th>Updated</th></tr></thead>
        <tbody>
          {runs.map((run) => (
            <tr key={run.id} data-testid="run-row" data-run-id={run.id} data-status={run.status}>
              <td><a href={`/runs/${run.id}`} onClick={onLink}><code>{run.id.slice(0, 8)}</code></a></td>
              {!flowId && <td><a href={`/flows/${run.flow_id}`} onClick={onLink}>{flowNames?.[run.flow_id] ?? run.flow_id.slice(0, 8)}</a></td>}
              <td><span className={`badge status-${run.status}`}>{run.status.replace(/_/g, " ")}</span></td>
              <td>{when(run.created_at)}</td>
              <td>{when(run.updated_at)}</td>
            </tr>
          ))}
          {runs.length === 0 && <tr><td colSpan={5} className="empty">No runs.</td></tr>}
        </tbody>
      </table>
    </section>
  );
}
