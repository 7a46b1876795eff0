// JSON Schema as the console's forms read it: the properties of an object schema, each a field
// of a kind the form can draw (string, number, integer, boolean, enum) or else a JSON field.
// A boolean or string-enum property with "x-stitch-action": true is drawn as buttons that set it
// and send the form. The checks here are a form's (required, type, enum, bounds) before sending;
// the server checks the value against the whole schema and its 422 names the field.

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
export type JsonObject = { [key: string]: Json };
export type FieldKind = "string" | "number" | "integer" | "boolean" | "enum" | "json";
export const EDITABLE_KINDS: Exclude<FieldKind, "json">[] = ["string", "number", "integer", "boolean", "enum"];
export const ACTION = "x-stitch-action";

export interface FieldSpec {
  name: string; kind: FieldKind; title: string; description: string; required: boolean; action: boolean;
  default: Json | undefined; options: string[]; property: JsonObject;
}

export function isObject(value: unknown): value is JsonObject {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function kindOf(property: JsonObject): FieldKind {
  if (Array.isArray(property.enum) && property.enum.length > 0 && property.enum.every((v) => typeof v === "string")) return "enum";
  const type = property.type;
  if (type === "string" || type === "number" || type === "integer" || type === "boolean") return type;
  return "json";
}

/** The fields of an object schema, in its properties' order; [] for anything else. */
export function fieldsOf(schema: unknown): FieldSpec[] {
  if (!isObject(schema) || !isObject(schema.properties)) return [];
  const required = Array.isArray(schema.required) ? schema.required.filter((r): r is string => typeof r === "string") : [];
  return Object.entries(schema.properties).map(([name, raw]) => {
    const property = isObject(raw) ? raw : {};
    const kind = kindOf(property);
    return {
      name, kind, property,
      title: typeof property.title === "string" ? property.title : name,
      description: typeof property.description === "string" ? property.description : "",
      required: required.includes(name),
      action: property[ACTION] === true && (kind === "boolean" || kind === "enum"),
      default: property.default,
      options: kind === "enum" ? (property.enum as string[]) : [],
    };
  });
}

/** Whether a schema gives the form anything to draw (an object schema with properties). */
export function hasForm(schema: unknown): boolean {
  return fieldsOf(schema).length > 0;
}

/** What a field's input holds, as text (a checkbox's as "true"/"false"). */
export function initialText(field: FieldSpec): string {
  const value = field.default;
  if (value === undefined) return field.kind === "boolean" ? "false" : "";
  if (field.kind === "json") return JSON.stringify(value, null, 2);
  return typeof value === "string" ? value : JSON.stringify(value);
}

function jsonType(value: Json): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "array";
  if (typeof value === "number") return Number.isInteger(value) ? "integer" : "number";
  return typeof value;
}

function bounds(property: JsonObject, value: number): string | null {
  const { minimum, maximum, exclusiveMinimum, exclusiveMaximum } = property;
  if (typeof minimum === "number" && value < minimum) return `must be at least ${minimum}`;
  if (typeof maximum === "number" && value > maximum) return `must be at most ${maximum}`;
  if (typeof exclusiveMinimum === "number" && value <= exclusiveMinimum) return `must be more than ${exclusiveMinimum}`;
  if (typeof exclusiveMaximum === "number" && value >= exclusiveMaximum) return `must be less than ${exclusiveMaximum}`;
  return null;
}

/** One field's value from its text, or why it cannot be sent; `undefined` value: left out. */
export function readField(field: FieldSpec, text: string): { value?: Json; problem?: string } {
  const { property } = field;
  if (field.kind === "boolean") return { value: text === "true" };
  if (text.trim() === "" && field.kind !== "string") {
    return field.required ? { problem: "is required" } : {};
  }
  if (field.kind === "string") {
    if (text === "") return field.required ? { problem: "is required" } : {};
    if (typeof property.minLength === "number" && text.length < property.minLength) return { problem: `needs at least ${property.minLength} characters` };
    if (typeof property.maxLength === "number" && text.length > property.maxLength) return { problem: `takes at most ${property.maxLength} characters` };
    // A pattern is left to the server, which runs it in linear time: the browser's RegExp
    // backtracks, and a flow's author could freeze the tab of whoever answers the form.
    return { value: text };
  }
  if (field.kind === "enum") {
    return field.options.includes(text) ? { value: text } : { problem: `must be one of ${field.options.join(", ")}` };
  }
  if (field.kind === "number" || field.kind === "integer") {
    const value = Number(text);
    if (!Number.isFinite(value)) return { problem: "must be a number" };
    if (field.kind === "integer" && !Number.isInteger(value)) return { problem: "must be a whole number" };
    const outside = bounds(property, value);
    return outside ? { problem: outside } : { value };
  }
  let value: Json;
  try { value = JSON.parse(text) as Json; } catch (e) { return { problem: `is not JSON: ${(e as Error).message}` }; }
  const wanted = property.type;
  if (typeof wanted === "string" && jsonType(value) !== wanted && !(wanted === "number" && jsonType(value) === "integer")) {
    return { problem: `must be ${wanted === "array" || wanted === "object" ? "an" : "a"} ${wanted}` };
  }
  return { value };
}

/** The value of a whole form, or each field's problem. */
export function readForm(fields: FieldSpec[], texts: Record<string, string>): { value: JsonObject; problems: Record<string, string> } {
  const value: JsonObject = {};
  const problems: Record<string, string> = {};
  for (const field of fields) {
    const read = readField(field, texts[field.name] ?? initialText(field));
    if (read.problem) problems[field.name] = read.problem;
    else if (read.value !== undefined) value[field.name] = read.value;
  }
  return { value, problems };
}

/** A field edited in the schema editor, back to its JSON Schema property (other keys kept). */
export function propertyOf(kind: Exclude<FieldKind, "json">, keep: JsonObject, options: string[], action: boolean, fallback: Json | undefined): JsonObject {
  const { type: _type, enum: _enum, [ACTION]: _action, default: _default, ...rest } = keep;
  void _type; void _enum; void _action; void _default;
  const property: JsonObject = kind === "enum" ? { ...rest, type: "string", enum: options } : { ...rest, type: kind };
  if (action && (kind === "boolean" || kind === "enum")) property[ACTION] = true;
  if (fallback !== undefined) property.default = fallback;
  return property;
}

/** A default typed by a person, as the kind's JSON value (undefined: none, or not of the kind). */
export function defaultOf(kind: Exclude<FieldKind, "json">, text: string): Json | undefined {
  if (text === "") return undefined;
  if (kind === "boolean") return text === "true" ? true : text === "false" ? false : undefined;
  if (kind === "number" || kind === "integer") {
    const value = Number(text);
    return Number.isFinite(value) && (kind === "number" || Number.isInteger(value)) ? value : undefined;
  }
  return text;
}

/** A schema with one property set (or removed, with `property` null), its `required` kept in step. */
export function withProperty(schema: unknown, name: string, property: JsonObject | null, required: boolean, rename?: string): JsonObject {
  const base: JsonObject = isObject(schema) ? { ...schema } : {};
  base.type = "object";
  const properties: JsonObject = {};
  const old = isObject(base.properties) ? base.properties : {};
  let placed = false;
  for (const [key, value] of Object.entries(old)) {
    if (key === name) {
      placed = true;
      if (property) properties[rename ?? name] = property;
    } else properties[key] = value;
  }
  if (!placed && property) properties[rename ?? name] = property;
  base.properties = properties;
  const list = (Array.isArray(base.required) ? base.required : []).filter((r) => r !== name && r !== rename);
  if (property && required) list.push(rename ?? name);
  if (list.length) base.required = list; else delete base.required;
  return base;
}
