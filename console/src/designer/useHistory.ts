// Undo and redo over whole documents (they share every unchanged node, so a step costs little).
// An edit is recorded; a drag's steps, selection and React Flow's measurements are not (a drag
// is recorded once, when it stops); typing in one field is one step. `revision` counts the
// recorded changes: the designer validates when it moves, never on a drag step.
import { useCallback, useRef, useState } from "react";
import type { Doc } from "./model";

const LIMIT = 200;
const COALESCE_MS = 1500;

interface State { past: Doc[]; present: Doc; future: Doc[]; revision: number }
export type Change = (doc: Doc) => Doc;
export type Mode = "record" | "silent" | { coalesce: string };

export interface History {
  doc: Doc; revision: number; canUndo: boolean; canRedo: boolean;
  change: (fn: Change, mode?: Mode) => void;
  /** Records `before` as the step before now (a drag that has stopped). */
  recordFrom: (before: Doc) => void;
  reset: (doc: Doc) => void;
  undo: () => void;
  redo: () => void;
  current: () => Doc;
}

export function useHistory(initial: () => Doc): History {
  const [state, setState] = useState<State>(() => ({ past: [], present: initial(), future: [], revision: 0 }));
  const last = useRef<{ key: string; at: number } | null>(null);
  const latest = useRef(state);
  latest.current = state;

  const change = useCallback((fn: Change, mode: Mode = "record") => {
    setState((s) => {
      const next = fn(s.present);
      if (next === s.present) return s;
      if (mode === "silent") return { ...s, present: next };
      const now = Date.now();
      const key = typeof mode === "object" ? mode.coalesce : null;
      const joins = key !== null && last.current?.key === key && now - last.current.at < COALESCE_MS && s.past.length > 0;
      last.current = key === null ? null : { key, at: now };
      return { past: joins ? s.past : [...s.past.slice(-LIMIT), s.present], present: next, future: [], revision: s.revision + 1 };
    });
  }, []);
  const recordFrom = useCallback((before: Doc) => {
    last.current = null;
    setState((s) => (before === s.present ? s : { past: [...s.past.slice(-LIMIT), before], present: s.present, future: [], revision: s.revision + 1 }));
  }, []);
  const reset = useCallback((doc: Doc) => setState((s) => ({ past: [], present: doc, future: [], revision: s.revision + 1 })), []);
  const undo = useCallback(() => {
    last.current = null;
    setState((s) => (s.past.length === 0 ? s
      : { past: s.past.slice(0, -1), present: s.past[s.past.length - 1], future: [s.present, ...s.future], revision: s.revision + 1 }));
  }, []);
  const redo = useCallback(() => {
    last.current = null;
    setState((s) => (s.future.length === 0 ? s
      : { past: [...s.past, s.present], present: s.future[0], future: s.future.slice(1), revision: s.revision + 1 }));
  }, []);
  const current = useCallback(() => latest.current.present, []);

  return {
    doc: state.present, revision: state.revision, canUndo: state.past.length > 0, canRedo: state.future.length > 0,
    change, recordFrom, reset, undo, redo, current,
  };
}
