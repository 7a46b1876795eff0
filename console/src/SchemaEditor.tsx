// Edits an input form's JSON Schema field by field (name, kind, required, default, enum values,
// action flag), with the raw schema beside it for anything else. Keys it does not edit (title,
// description, bounds, nested schemas) are kept as they are.
import { useEffect, useState } from "react";
import {
  ACTION, defaultOf, EDITABLE_KINDS, fieldsOf, isObject, propertyOf, withProperty, type FieldKind, type FieldSpec, type JsonObject,
} from "./schema";
import { JsonBox } from "./JsonBox";

type Kind = Exclude<FieldKind, "json">;

function FieldRow({ field, onChange, onRemove }: {
  field: FieldSpec; onChange: (property: JsonObject, required: boolean) => void; onRemove: () => void;
}) {
  const editable = field.kind !== "json";
  const kind = field.kind as Kind;
  const [options, setOptions] = useState(field.options.join(", "));
  const [fallback, setFallback] = useState(field.default === undefined ? "" : String(field.default));
  useEffect(() => setOptions(field.options.join(", ")), [field.options]);
  useEffect(() => setFallback(field.default === undefined ? "" : String(field.default)), [field.default]);
  const listOf = (text: string) => text.split(",").map((o) => o.trim()).filter(Boolean);
  const update = (next: { kind?: Kind; options?: string[]; action?: boolean; fallback?: string; required?: boolean }) => {
    const k = next.kind ?? kind;
    const opts = next.options ?? listOf(options);
    onChange(propertyOf(k, field.property, k === "enum" && opts.length === 0 ? ["yes", "no"] : opts, next.action ?? field.action,
      defaultOf(k, next.fallback ?? fallback)), next.required ?? field.required);
  };
  return (
    <tr data-testid={`schema-field-${field.name}`}>
      <td><code>{field.name}</code></td>
      <td>{editable
        ? <select data-testid={`schema-kind-${field.name}`} value={kind} onChange={(e) => update({ kind: e.target.value as Kind, fallback: "" })}>
            {EDITABLE_KINDS.map((k) => <option key={k} value={k}>{k}</option>)}
          </select>
        : <span title="Edit it in the raw schema">{String(field.property.type ?? "other")}</span>}</td>
      <td><input type="checkbox" data-testid={`schema-required-${field.name}`} checked={field.required} title="required"
                 onChange={(e) => (editable ? update({ required: e.target.checked }) : onChange(field.property, e.target.checked))} /></td>
      <td>{editable && (kind === "boolean"
        ? <select data-testid={`schema-default-${field.name}`} value={fallback} onChange={(e) => { setFallback(e.target.value); update({ fallback: e.target.value }); }}>
            <option value="">none</option><option value="true">true</option><option value="false">false</option>
          </select>
        : <input data-testid={`schema-default-${field.name}`} value={fallback} placeholder="none" size={5}
                 onChange={(e) => setFallback(e.target.value)} onBlur={() => update({})} />)}</td>
      <td>{editable && kind === "enum" &&
        <input data-testid={`schema-enum-${field.name}`} value={options} placeholder="a, b" size={7}
               onChange={(e) => setOptions(e.target.value)} onBlur={() => update({ options: listOf(options) })} />}</td>
      <td>{editable && (kind === "boolean" || kind === "enum") &&
        <input type="checkbox" data-testid={`schema-action-${field.name}`} checked={field.action} title="drawn as buttons that send the form"
               onChange={(e) => update({ action: e.target.checked })} />}</td>
      <td><button type="button" className="icon" data-testid={`schema-remove-${field.name}`} onClick={onRemove} aria-label={`Remove ${field.name}`}>×</button></td>
    </tr>
  );
}

export function SchemaEditor({ schema, onChange, testId }: { schema: unknown; onChange: (schema: JsonObject | undefined) => void; testId: string }) {
  const fields = fieldsOf(schema);
  const [name, setName] = useState("");
  const [kind, setKind] = useState<Kind>("string");
  const taken = fields.some((f) => f.name === name.trim());

  function add() {
    const field = name.trim();
    if (!field || taken) return;
    const property: JsonObject = propertyOf(kind, {}, kind === "enum" ? ["yes", "no"] : [], false, undefined);
    onChange(withProperty(schema, field, property, false));
    setName("");
  }
  function change(field: FieldSpec, property: JsonObject | null, required: boolean) {
    const next = withProperty(schema, field.name, property, required);
    onChange(isObject(next.properties) && Object.keys(next.properties).length === 0 && Object.keys(next).length <= 2 ? undefined : next);
  }

  return (
    <div className="schema-editor" data-testid={testId}>
      <div className="schema-table">
      <table className="compact">
        <thead><tr><th>Field</th><th>Kind</th><th title="required">Req.</th><th>Default</th><th title="the values of a choice (enum)">Values</th>
          <th title={`${ACTION}: drawn as buttons that send the form`}>Btn</th><th /></tr></thead>
        <tbody>
          {fields.map((field) => (
            <FieldRow key={field.name} field={field} onChange={(p, r) => change(field, p, r)} onRemove={() => change(field, null, false)} />
          ))}
          {fields.length === 0 && <tr><td colSpan={7} className="empty">No fields.</td></tr>}
        </tbody>
      </table>
      </div>
      <div className="add-field">
        <input data-testid="schema-add-name" placeholder="field name" value={name} onChange={(e) => setName(e.target.value)}
               onKeyDown={(e) => { if (e.key === "Enter") { e.preventDefault(); add(); } }} />
        <select data-testid="schema-add-kind" value={kind} onChange={(e) => setKind(e.target.value as Kind)}>
          {EDITABLE_KINDS.map((k) => <option key={k} value={k}>{k}</option>)}
        </select>
        <button type="button" data-testid="schema-add" disabled={!name.trim() || taken} onClick={add}>Add field</button>
      </div>
      <details>
        <summary>Raw schema</summary>
        <JsonBox value={schema} testId="schema-raw" rows={6} emptyIsUndefined
                 check={(v) => (v === undefined || isObject(v) ? null : "an input schema is a JSON object")}
                 onChange={(v) => onChange(v as JsonObject | undefined)} />
      </details>
    </div>
  );
}
