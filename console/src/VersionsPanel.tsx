// A flow's versions, newest first, with who saved each and when: view one, or pick two to compare.
import { useState } from "react";
import { when, type FlowVersion } from "./api";

export function VersionsPanel({ versions, shown, onView, onCompare, problem }: {
  versions: FlowVersion[] | null; shown: number | null; onView: (v: number) => void; onCompare: (from: number, to: number) => void; problem: string;
}) {
  const newest = versions?.[0]?.version ?? null;
  const [from, setFrom] = useState<number | null>(null);
  const [to, setTo] = useState<number | null>(null);
  const a = from ?? versions?.[1]?.version ?? null;
  const b = to ?? newest;
  return (
    <section className="versions" data-testid="versions">
      <div className="toolbar">
        <h3>Versions</h3>
        {versions && versions.length > 1 && (
          <>
            <label>Compare <select data-testid="diff-from" value={a ?? ""} onChange={(e) => setFrom(Number(e.target.value))}>
              {versions.map((v) => <option key={v.version} value={v.version}>v{v.version}</option>)}
            </select></label>
            <label>with <select data-testid="diff-to" value={b ?? ""} onChange={(e) => setTo(Number(e.target.value))}>
              {versions.map((v) => <option key={v.version} value={v.version}>v{v.version}</option>)}
            </select></label>
            <button data-testid="show-diff" disabled={a === null || b === null || a === b} onClick={() => a !== null && b !== null && onCompare(a, b)}>Show changes</button>
          </>
        )}
      </div>
      {problem && <p className="error">{problem}</p>}
      <table>
        <thead><tr><th>Version</th><th>Name</th><th>Author</th><th>Saved</th><th>Nodes</th><th>Edges</th><th /></tr></thead>
        <tbody>
          {(versions ?? []).map((v) => (
            <tr key={v.version} data-testid="version-row" data-version={v.version} className={v.version === shown ? "current" : ""}>
              <td>v{v.version}{v.version === newest && <small> (newest)</small>}</td>
              <td>{v.name}</td><td data-testid="version-author">{v.author ?? "—"}</td><td>{when(v.created_at)}</td>
              <td>{v.node_count}</td><td>{v.edge_count}</td>
              <td><button data-testid={`view-version-${v.version}`} disabled={v.version === shown} onClick={() => onView(v.version)}>View</button></td>
            </tr>
          ))}
          {versions?.length === 0 && <tr><td colSpan={7} className="empty">No versions.</td></tr>}
        </tbody>
      </table>
    </section>
  );
}
