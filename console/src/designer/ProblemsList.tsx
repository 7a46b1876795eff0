// What the server says is wrong with the graph as drawn (and its warnings); clicking one selects
// its node or edge.
import { memo } from "react";
import type { Problem } from "../api";
import type { Checked } from "./useValidation";

export const ProblemsList = memo(function ProblemsList({ checked, stale, saveProblems, onPick }: {
  checked: Checked; stale: boolean; saveProblems: Problem[]; onPick: (p: Problem) => void;
}) {
  const { validation, unavailable } = checked;
  const problems = [...saveProblems, ...(validation?.problems ?? [])];
  const warnings = validation?.warnings ?? [];
  const state = stale || checked.pending ? "checking" : unavailable ? "unavailable" : problems.length ? "invalid" : "valid";
  return (
    <section className="problems-list" data-testid="problems" data-state={state} data-count={problems.length}>
      <h4>
        {state === "checking" ? "Checking…" : state === "unavailable" ? "Not checked"
          : problems.length ? `${problems.length} problem${problems.length === 1 ? "" : "s"}` : "No problems"}
        {warnings.length > 0 && <small> · {warnings.length} warning{warnings.length === 1 ? "" : "s"}</small>}
      </h4>
      {unavailable && <p className="error">{unavailable}</p>}
      <ul>
        {problems.map((p, i) => (
          <li key={`p${i}`} className="error" data-testid="problem" data-rule={p.rule} data-node={p.node_id ?? ""} data-edge={p.edge_id ?? ""}
              onClick={() => onPick(p)}>
            <code>{p.rule}</code> {p.message}
          </li>
        ))}
        {warnings.map((p, i) => (
          <li key={`w${i}`} className="warning" data-testid="warning" data-rule={p.rule} onClick={() => onPick(p)}>
            <code>{p.rule}</code> {p.message}
          </li>
        ))}
      </ul>
    </section>
  );
});
