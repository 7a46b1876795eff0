// The side panel of the selected node: the fields the engine reads for its type (Worker: webhook
// URL, timeout, retry policy, config; UX gate: prompt and input form; Splitter: where the array
// is; Collector: what it gathers), then the rest of its data as JSON. Keys it does not know are
// kept.
import { memo, useEffect, useState } from "react";
import { JsonBox } from "../JsonBox";
import { SchemaEditor } from "../SchemaEditor";
import { isObject } from "../schema";
import type { Mark } from "./parts";
import type { DataMap } from "./model";

export type DataEdit = (id: string, update: (data: DataMap) => DataMap, field: string) => void;

const KNOWN: Record<string, string[]> = {
  Worker: ["label", "webhookUrl", "timeoutSeconds", "retry", "config"],
  UX: ["label", "prompt", "inputSchema"],
  Splitter: ["label", "arrayPath"],
  Collector: ["label"],
};

function set(data: DataMap, key: string, value: unknown): DataMap {
  const next = { ...data };
  if (value === undefined) delete next[key]; else next[key] = value;
  return next;
}

/** A text input bound to data[key] (absent when empty). */
function TextField({ label, value, onChange, testId, hint, multiline, placeholder }: {
  label: string; value: unknown; onChange: (value: string | undefined) => void; testId: string; hint?: string; multiline?: boolean; placeholder?: string;
}) {
  const text = typeof value === "string" ? value : value === undefined ? "" : JSON.stringify(value);
  return (
    <label className="field">
      <span>{label}</span>
      {multiline
        ? <textarea data-testid={testId} rows={3} value={text} placeholder={placeholder} onChange={(e) => onChange(e.target.value || undefined)} />
        : <input data-testid={testId} value={text} placeholder={placeholder} onChange={(e) => onChange(e.target.value || undefined)} />}
      {hint && <small>{hint}</small>}
    </label>
  );
}

/** A number input: the typed text stays as typed; a number (or empty: absent) is passed on. */
function NumberField({ label, value, onChange, testId, hint }: {
  label: string; value: unknown; onChange: (value: number | undefined) => void; testId: string; hint?: string;
}) {
  const [text, setText] = useState(typeof value === "number" ? String(value) : "");
  useEffect(() => {  // an undo, not this input, changed it
    setText((t) => (typeof value !== "number" ? (value === undefined && t !== "" && Number.isFinite(Number(t)) ? "" : t)
      : t !== "" && Number(t) === value ? t : String(value)));
  }, [value]);
  return (
    <label className="field">
      <span>{label}</span>
      <input data-testid={testId} type="number" step="any" value={text}
             onChange={(e) => { setText(e.target.value); const n = e.target.valueAsNumber; if (e.target.value === "") onChange(undefined); else if (Number.isFinite(n)) onChange(n); }} />
      {hint && <small>{hint}</small>}
    </label>
  );
}

function IdField({ id, onRename }: { id: string; onRename: (to: string) => string | null }) {
  const [draft, setDraft] = useState(id);
  const [problem, setProblem] = useState("");
  useEffect(() => { setDraft(id); setProblem(""); }, [id]);
  const commit = () => { if (draft !== id) setProblem(onRename(draft.trim()) ?? ""); };
  return (
    <label className="field">
      <span>Node id</span>
      <input data-testid="field-id" value={draft} onChange={(e) => setDraft(e.target.value)} onBlur={commit}
             onKeyDown={(e) => { if (e.key === "Enter") commit(); }} />
      {problem && <span className="error">{problem}</span>}
    </label>
  );
}

function WorkerFields({ data, edit }: { data: DataMap; edit: (key: string, value: unknown) => void }) {
  const retry = isObject(data.retry) ? data.retry : null;
  const retryEdit = (key: string, value: number | undefined) => edit("retry", set(retry ?? { maxAttempts: 3 }, key, value));
  return (
    <>
      <TextField label="Webhook URL" value={data.webhookUrl} testId="field-webhookUrl" placeholder="https://worker.example/run"
                 hint="Stitch POSTs {runId, nodeId, config, input, callbackUrl} here." onChange={(v) => edit("webhookUrl", v)} />
      <NumberField label="Timeout (seconds)" value={data.timeoutSeconds} testId="field-timeoutSeconds"
                   hint="Fail an attempt after this long; empty: the server's default." onChange={(v) => edit("timeoutSeconds", v)} />
      <label className="field inline">
        <input type="checkbox" data-testid="field-retry" checked={retry !== null}
               onChange={(e) => edit("retry", e.target.checked ? { maxAttempts: 3, backoffSeconds: 1, backoffFactor: 2 } : undefined)} />
        <span>Retry failed attempts</span>
      </label>
      {retry && (
        <div className="field-group">
          <NumberField label="Attempts" value={retry.maxAttempts} testId="field-maxAttempts" onChange={(v) => retryEdit("maxAttempts", v)} />
          <NumberField label="First wait (s)" value={retry.backoffSeconds} testId="field-backoffSeconds" onChange={(v) => retryEdit("backoffSeconds", v)} />
          <NumberField label="Wait factor" value={retry.backoffFactor} testId="field-backoffFactor" onChange={(v) => retryEdit("backoffFactor", v)} />
        </div>
      )}
      <label className="field">
        <span>Config (JSON, sent to the worker as part of <code>config</code>)</span>
        <JsonBox value={data.config} testId="field-config" emptyIsUndefined onChange={(v) => edit("config", v)} />
      </label>
    </>
  );
}

export const NodeEditor = memo(function NodeEditor({ id, kind, data, marks, splitters, onData, onRename, onDelete }: {
  id: string; kind: string; data: DataMap; marks: Mark[]; splitters: string[]; onData: DataEdit;
  onRename: (from: string, to: string) => string | null; onDelete: () => void;
}) {
  const edit = (key: string, value: unknown) => onData(id, (d) => set(d, key, value), `${id}.${key}`);
  const known = KNOWN[kind] ?? [];
  const rest = Object.fromEntries(Object.entries(data).filter(([key]) => !known.includes(key)));
  return (
    <aside className="panel designer-panel" data-testid="node-editor" data-node={id}>
      <div className="toolbar">
        <h3>{kind === "UX" ? "UX gate" : kind} <small>{id}</small></h3>
        <button className="danger" data-testid="delete-node" onClick={onDelete}>Delete</button>
      </div>
      {marks.length > 0 && (
        <ul className="problems" data-testid="node-problems">
          {marks.map((m, i) => <li key={i} className={m.warning ? "warning" : "error"}>{m.message}</li>)}
        </ul>
      )}
      <IdField id={id} onRename={(to) => onRename(id, to)} />
      <TextField label="Label" value={data.label} testId="field-label" placeholder={id} onChange={(v) => edit("label", v)} />
      {kind === "Worker" && <WorkerFields data={data} edit={edit} />}
      {kind === "UX" && (
        <>
          <TextField label="Prompt" value={data.prompt} testId="field-prompt" multiline placeholder="What should the person decide?"
                     onChange={(v) => edit("prompt", v)} />
          <h4>Input form</h4>
          <p className="hint">What the person fills in; a boolean or choice marked “Buttons” becomes Approve / Reject (or one button per value).</p>
          <SchemaEditor schema={data.inputSchema} testId="ux-schema" onChange={(s) => edit("inputSchema", s)} />
        </>
      )}
      {kind === "Splitter" && (
        <TextField label="Array path" value={data.arrayPath} testId="field-arrayPath" placeholder="items"
                   hint="A dotted path to the array in the Splitter's input (items, result.rows); empty: the input itself is the array. Each element runs on a path of its own."
                   onChange={(v) => edit("arrayPath", v)} />
      )}
      {kind === "Collector" && (
        <p className="hint" data-testid="collector-info">
          Gathers, in index order, the outputs of the paths of the Splitter it closes
          {splitters.length ? <> (upstream: {splitters.map((s) => <code key={s}>{s}</code>)})</> : " (none upstream yet)"}; it has no settings.
        </p>
      )}
      <details open={Object.keys(rest).length > 0}>
        <summary>Other data (JSON)</summary>
        <JsonBox value={rest} testId="field-data-rest" rows={4}
                 check={(v) => (isObject(v) ? null : "the rest of data is a JSON object")}
                 onChange={(v) => onData(id, (d) => ({ ...Object.fromEntries(Object.entries(d).filter(([k]) => known.includes(k))), ...(v as DataMap) }), `${id}.rest`)} />
      </details>
    </aside>
  );
});
