// A form drawn from a JSON Schema (schema.ts): one input per field, a JSON box for what it cannot
// draw, Approve / Reject (or one button per value) for an action field. It checks the value
// before sending; a 422 from the server shows on the field its `loc` names. Without a schema
// to draw, it is one JSON box, as before.
import { useState, type FormEvent } from "react";
import { ApiError } from "./api";
import { fieldsOf, initialText, readForm, type FieldSpec, type Json } from "./schema";

export interface FormIds { raw: string; submit: string; error: string }

/** Where a 422 item points inside the form's value, after `prefix` (["body"] or ["body", "input"]). */
function fieldOf(loc: (string | number)[] | undefined, prefix: string[]): string | null {
  if (!loc || loc.length <= prefix.length || prefix.some((p, i) => loc[i] !== p)) return null;
  return String(loc[prefix.length]);
}

function FieldInput({ field, text, onText }: { field: FieldSpec; text: string; onText: (text: string) => void }) {
  const id = `form-field-${field.name}`;
  if (field.kind === "boolean") {
    return <input type="checkbox" data-testid={id} checked={text === "true"} onChange={(e) => onText(String(e.target.checked))} />;
  }
  if (field.kind === "enum") {
    return (
      <select data-testid={id} value={text} onChange={(e) => onText(e.target.value)}>
        {!field.required || text === "" ? <option value="">—</option> : null}
        {field.options.map((o) => <option key={o} value={o}>{o}</option>)}
      </select>
    );
  }
  if (field.kind === "json") {
    return <textarea data-testid={id} rows={3} value={text} spellCheck={false} onChange={(e) => onText(e.target.value)} placeholder="JSON" />;
  }
  return <input data-testid={id} type={field.kind === "string" ? "text" : "number"} step={field.kind === "integer" ? 1 : "any"}
                value={text} onChange={(e) => onText(e.target.value)} />;
}

export function SchemaForm({ schema, onSubmit, submitLabel, locPrefix, ids, rawDefault = "{}" }: {
  schema: unknown; onSubmit: (value: Json) => Promise<void>; submitLabel: string; locPrefix: string[]; ids: FormIds; rawDefault?: string;
}) {
  const fields = fieldsOf(schema);
  const [texts, setTexts] = useState<Record<string, string>>(() => Object.fromEntries(fields.map((f) => [f.name, initialText(f)])));
  const [raw, setRaw] = useState(rawDefault);
  const [problems, setProblems] = useState<Record<string, string>>({});
  const [problem, setProblem] = useState("");
  const [sending, setSending] = useState(false);
  const actions = fields.filter((f) => f.action);

  async function send(value: Json) {
    setSending(true);
    try {
      await onSubmit(value);
    } catch (e) {
      const placed: Record<string, string> = {};
      const rest: string[] = [];
      for (const item of e instanceof ApiError ? e.items : []) {
        const name = fieldOf(item.loc, locPrefix);
        if (name !== null && fields.some((f) => f.name === name)) placed[name] = item.msg ?? `${name}: refused`;  // the server's says the field
        else rest.push(item.msg ?? JSON.stringify(item));
      }
      setProblems(placed);
      setProblem(Object.keys(placed).length && !rest.length ? "" : rest.length ? rest.join("\n") : (e as Error).message);
    } finally {
      setSending(false);
    }
  }

  function submit(event: FormEvent | null, action?: { name: string; value: string }) {
    event?.preventDefault();
    if (!fields.length) {
      let value: Json;
      try { value = JSON.parse(raw) as Json; } catch (e) { setProblem(`Not JSON: ${(e as Error).message}`); return; }
      setProblem("");
      void send(value);
      return;
    }
    const current = action ? { ...texts, [action.name]: action.value } : texts;
    if (action) setTexts(current);
    const { value, problems: found } = readForm(fields, current);
    setProblems(Object.fromEntries(Object.entries(found).map(([name, p]) => [name, `${fields.find((f) => f.name === name)?.title ?? name} ${p}`])));
    if (Object.keys(found).length) { setProblem("Fix the fields marked in red first."); return; }
    setProblem("");
    void send(value);
  }

  if (!fields.length) {
    return (
      <form className="schema-form" onSubmit={(e) => submit(e)}>
        <textarea data-testid={ids.raw} rows={4} value={raw} onChange={(e) => setRaw(e.target.value)} spellCheck={false} />
        {problem && <pre className="error" data-testid={ids.error}>{problem}</pre>}
        <button data-testid={ids.submit} type="submit" disabled={sending}>{submitLabel}</button>
      </form>
    );
  }
  return (
    <form className="schema-form" data-testid="schema-form" onSubmit={(e) => submit(e)} noValidate>
      {fields.filter((f) => !f.action).map((field) => (
        <label key={field.name} className={`form-row kind-${field.kind}${problems[field.name] ? " invalid" : ""}`}>
          <span className="form-label">{field.title}{field.required && <b className="required" title="required"> *</b>}</span>
          <FieldInput field={field} text={texts[field.name] ?? ""} onText={(t) => setTexts({ ...texts, [field.name]: t })} />
          {field.description && <small>{field.description}</small>}
          {problems[field.name] && <span className="error" data-testid={`form-error-${field.name}`}>{problems[field.name]}</span>}
        </label>
      ))}
      {problem && <pre className="error" data-testid={ids.error}>{problem}</pre>}
      <div className="form-actions">
        {actions.length === 0 && <button data-testid={ids.submit} type="submit" disabled={sending}>{submitLabel}</button>}
        {actions.map((field) => (field.kind === "boolean"
          ? [["true", "Approve"], ["false", "Reject"]] : field.options.map((o) => [o, o])).map(([value, text]) => (
            <button key={`${field.name}=${value}`} type="button" disabled={sending} data-testid={`action-${field.name}-${value}`}
                    className={value === "false" ? "danger" : value === "true" ? "primary" : ""} title={field.description || field.title}
                    onClick={() => submit(null, { name: field.name, value })}>{text}</button>
          )))}
        {actions.map((field) => problems[field.name] && <span key={field.name} className="error" data-testid={`form-error-${field.name}`}>{problems[field.name]}</span>)}
      </div>
    </form>
  );
}
