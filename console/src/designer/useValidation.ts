// Asks the server what is wrong with the graph (POST /flows/validate, the rules a save applies)
// 300 ms after the last recorded change, cancelling a request the next change makes stale.
// The rules live on the server only: the designer shows what it says.
import { useEffect, useRef, useState } from "react";
import { api, ApiError, type Graph, type Problem, type Validation } from "../api";

export const DEBOUNCE_MS = 300;

export interface Checked { validation: Validation | null; revision: number; pending: boolean; unavailable: string }

/** A 422's items (on save, or a graph the validate endpoint could not even read) as problems. */
export function problemsOf(error: unknown): Problem[] {
  if (!(error instanceof ApiError)) return [];
  return error.items.map((item) => ({
    rule: item.rule ?? item.type ?? "invalid", message: item.msg ?? "refused",
    node_id: item.node_id ?? null, edge_id: item.edge_id ?? null, field: item.field ?? null,
  }));
}

function same(a: Validation | null, b: Validation): boolean {
  return a !== null && JSON.stringify(a) === JSON.stringify(b);
}

export function useValidation(graph: () => Graph, revision: number): Checked {
  const [checked, setChecked] = useState<Checked>({ validation: null, revision: -1, pending: true, unavailable: "" });
  const read = useRef(graph);
  read.current = graph;

  useEffect(() => {
    const controller = new AbortController();
    setChecked((c) => (c.pending ? c : { ...c, pending: true }));
    const timer = window.setTimeout(async () => {
      try {
        const validation = await api<Validation>("/flows/validate", { method: "POST", body: { graph: read.current() }, signal: controller.signal });
        // The same verdict keeps its identity: the canvas's marks (and every node) stay as they are.
        setChecked((c) => ({ validation: same(c.validation, validation) ? c.validation : validation, revision, pending: false, unavailable: "" }));
      } catch (error) {
        if (controller.signal.aborted) return;
        const problems = problemsOf(error);
        if (error instanceof ApiError && error.status === 422 && problems.length) {
          setChecked({ validation: { valid: false, problems, warnings: [] }, revision, pending: false, unavailable: "" });
        } else {
          setChecked({ validation: null, revision, pending: false, unavailable: `The graph could not be checked: ${(error as Error).message}` });
        }
      }
    }, DEBOUNCE_MS);
    return () => { window.clearTimeout(timer); controller.abort(); };
  }, [revision]);

  return checked;
}
