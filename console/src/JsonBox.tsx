// A textarea holding a JSON value: a change is passed on once the text is JSON (and passes
// `check`); until then the text stays as typed, with why it is not taken.
import { useEffect, useRef, useState } from "react";

function text(value: unknown): string {
  return value === undefined ? "" : JSON.stringify(value, null, 2);
}

export function JsonBox({ value, onChange, testId, rows = 4, emptyIsUndefined = false, check }: {
  value: unknown; onChange: (value: unknown) => void; testId: string; rows?: number; emptyIsUndefined?: boolean;
  check?: (value: unknown) => string | null;
}) {
  const [draft, setDraft] = useState(() => text(value));
  const [problem, setProblem] = useState("");
  const editing = useRef(false);
  useEffect(() => {
    if (!editing.current) { setDraft(text(value)); setProblem(""); }
  }, [value]);

  function edit(next: string) {
    setDraft(next);
    let parsed: unknown;
    if (next.trim() === "" && emptyIsUndefined) parsed = undefined;
    else {
      try { parsed = JSON.parse(next); } catch (e) { setProblem(`Not JSON yet: ${(e as Error).message}`); return; }
    }
    const refused = check?.(parsed) ?? null;
    setProblem(refused ?? "");
    if (!refused) onChange(parsed);
  }

  return (
    <>
      <textarea data-testid={testId} rows={rows} value={draft} spellCheck={false}
                onFocus={() => { editing.current = true; }}
                onBlur={() => { editing.current = false; if (!problem) setDraft(text(value)); }}
                onChange={(e) => edit(e.target.value)} />
      {problem && <span className="error" data-testid={`${testId}-error`}>{problem}</span>}
    </>
  );
}
