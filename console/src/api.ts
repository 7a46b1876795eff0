// The Stitch API as the console uses it: every call carries the API key from this tab's
// session (never a URL); a 401 asks the app to show the login form.
export const BASE = "/api/stitch";
const KEY = "stitch-api-key";

export type RunStatus = "running" | "waiting_for_user" | "completed" | "failed" | "cancelled";
export const RUN_STATUSES: RunStatus[] = ["running", "waiting_for_user", "completed", "failed", "cancelled"];
export const NODE_STATUSES = ["pending", "running", "completed", "failed", "waiting_for_user", "retrying", "cancelled"];

export type NodeKind = "Worker" | "UX" | "Splitter" | "Collector";
export const NODE_KINDS: NodeKind[] = ["Worker", "UX", "Splitter", "Collector"];
export interface XY { x: number; y: number }
// Graphs as saved: any other key (React Flow's width, style, a viewport, ...) is kept as it came.
export interface GraphNode { id: string; type: string; position?: XY; data?: Record<string, unknown>; [extra: string]: unknown }
export interface GraphEdge { id: string; source: string; target: string; sourceHandle?: string | null; targetHandle?: string | null; [extra: string]: unknown }
export interface Graph { nodes: GraphNode[]; edges: GraphEdge[]; inputSchema?: unknown; viewport?: unknown; [extra: string]: unknown }
/** One problem the server found in a graph (POST /flows/validate, or a 422 on save). */
export interface Problem { rule: string; message: string; node_id: string | null; edge_id: string | null; field: string | null }
export interface Validation { valid: boolean; problems: Problem[]; warnings: Problem[] }
/** One item of a 422's `detail`. */
export interface DetailItem { loc?: (string | number)[]; msg?: string; type?: string; rule?: string; node_id?: string | null; edge_id?: string | null; field?: string | null }
export interface FlowVersion { version: number; name: string; author: string | null; created_at: string; node_count: number; edge_count: number }
export interface VersionDetail { flow_id: string; version: number; name: string; author: string | null; created_at: string; graph: Graph }
export interface DiffPart { added: string[]; removed: string[]; changed: { id: string; fields: string[] }[] }
export interface FlowDiff { from: number; to: number; nodes: DiffPart & { moved: string[] }; edges: DiffPart }
export interface Flow {
  id: string; name: string; graph: Graph; version: number; created_at: string; updated_at: string;
  node_count?: number; last_run?: { id: string; status: RunStatus; created_at: string } | null;
}
export interface RunSummary { id: string; flow_id: string; flow_version: number; status: RunStatus; created_at: string; updated_at: string }
export interface NodeState {
  status: string; node_id: string; path: number[] | null; attempt: number; input?: unknown; output?: unknown;
  error?: string | null; fanout?: number | null; prompt?: string | null; paths?: Record<string, number> | null; updated_at?: string | null;
}
export interface Run extends RunSummary { input: unknown; graph: Graph; node_states: Record<string, NodeState> }
export interface RunEvent { id: number; run_id: string; node_key: string; status: string; attempt: number; at: string; error?: string | null; summary?: string | null; run_status?: RunStatus }
export interface Attempt { node_key: string; attempt: number; status: string; input?: unknown; output?: unknown; error?: string | null; worker_status?: number | null; started_at: string; finished_at?: string | null }
export interface Gate { run_id: string; flow_id: string; node_id: string; prompt: string | null; since: string | null; input_schema?: unknown }
export interface Reply { ok: boolean; detail: string; duplicate: boolean }

export class ApiError extends Error {
  constructor(public status: number, message: string, public detail: unknown = null) { super(message); }
  /** A 422's problems, each with where it is (`loc`) and, for graphs, its rule and node or edge. */
  get items(): DetailItem[] {
    return Array.isArray(this.detail) ? this.detail.filter((d): d is DetailItem => typeof d === "object" && d !== null) : [];
  }
}

let onUnauthorised: () => void = () => {};
export function whenUnauthorised(handler: () => void): void { onUnauthorised = handler; }
export const apiKey = {
  get: (): string | null => sessionStorage.getItem(KEY),
  set: (key: string) => sessionStorage.setItem(KEY, key),
  clear: () => sessionStorage.removeItem(KEY),
};

function headers(extra: Record<string, string> = {}): Record<string, string> {
  const key = apiKey.get();
  return key ? { ...extra, Authorization: `Bearer ${key}` } : extra;
}

/** The server's reason, as a person reads it: `detail`, or every problem's message. */
function reason(body: unknown, status: number): string {
  const detail = (body as { detail?: unknown } | null)?.detail;
  if (typeof detail === "string") return detail;
  if (Array.isArray(detail)) return detail.map((p) => (p as { msg?: string }).msg ?? JSON.stringify(p)).join("\n");
  return `the server answered ${status}`;
}

export async function api<T>(path: string, init: { method?: string; body?: unknown; key?: string; signal?: AbortSignal } = {}): Promise<T> {
  const sent: Record<string, string> = init.body === undefined ? {} : { "Content-Type": "application/json" };
  const response = await fetch(BASE + path, {
    method: init.method ?? "GET",
    headers: init.key ? { ...sent, Authorization: `Bearer ${init.key}` } : headers(sent),
    body: init.body === undefined ? undefined : JSON.stringify(init.body),
    signal: init.signal,
  });
  const text = await response.text();
  let body: unknown = null;
  try { body = text ? JSON.parse(text) : null; } catch { body = { detail: text }; }
  if (response.status === 401 && !init.key) onUnauthorised();
  if (!response.ok) throw new ApiError(response.status, reason(body, response.status), (body as { detail?: unknown } | null)?.detail ?? null);
  return body as T;
}

export interface SseMessage { event: string; id: string | null; data: unknown }

/** Follows a server-sent events endpoint with fetch (EventSource cannot send the key),
 * reconnecting with the last id seen. Returns a function that stops it. */
export function follow(path: string, onMessage: (m: SseMessage) => void, lastId?: () => number | null): () => void {
  const controller = new AbortController();
  let stopped = false;
  let delay = 500;
  let seen: string | null = null;
  const run = async () => {
    while (!stopped) {
      try {
        const after = lastId?.() ?? (seen === null ? null : Number(seen));
        const url = BASE + path + (after !== null && after !== undefined ? `${path.includes("?") ? "&" : "?"}after=${after}` : "");
        const response = await fetch(url, { headers: headers({ Accept: "text/event-stream" }), signal: controller.signal });
        if (response.status === 401) { onUnauthorised(); return; }
        if (!response.ok || !response.body) throw new Error(String(response.status));
        delay = 500;
        const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
        let buffer = "";
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buffer += value;
          let end: number;
          while ((end = buffer.indexOf("\n\n")) >= 0) {
            const block = buffer.slice(0, end);
            buffer = buffer.slice(end + 2);
            let event = "message", id: string | null = null;
            const data: string[] = [];
            for (const line of block.split("\n")) {
              if (line.startsWith(":")) continue;
              const colon = line.indexOf(":");
              const field = colon < 0 ? line : line.slice(0, colon);
              const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
              if (field === "event") event = value;
              else if (field === "id") id = value;
              else if (field === "data") data.push(value);
            }
            if (data.length === 0) continue;
            if (id !== null) seen = id;
            onMessage({ event, id, data: JSON.parse(data.join("\n")) });
          }
        }
      } catch (error) {
        if (stopped) return;
      }
      await new Promise((resolve) => setTimeout(resolve, delay));
      delay = Math.min(delay * 2, 10_000);
    }
  };
  void run();
  return () => { stopped = true; controller.abort(); };
}

/** JSON shown to people, without callback URLs or signatures. */
export function shown(value: unknown): string {
  if (value === undefined) return "";
  return JSON.stringify(value, (key, v) => (key === "callbackUrl" || key === "sig" ? undefined : v), 2);
}

/** A moment as the README promises it: UTC, ISO 8601, with its zone (2025-01-31T09:05:00Z). */
export function when(moment: string | null | undefined): string {
  if (!moment) return "";
  const date = new Date(moment);
  return Number.isNaN(date.getTime()) ? moment : date.toISOString().replace(/\.\d{3}Z$/, "Z");
}

/** Downloads `value` as a pretty JSON file. */
export function download(value: unknown, name: string): void {
  const blob = new Blob([JSON.stringify(value, null, 2)], { type: "application/json" });
  const link = document.createElement("a");
  link.href = URL.createObjectURL(blob);
  link.download = `${name.replace(/[^\w.-]+/g, "_") || "flow"}.json`;
  link.click();
  setTimeout(() => URL.revokeObjectURL(link.href), 1000);
}

/** A flow file as people export it ({name, graph}) or as any React Flow app saves it (the graph alone). */
export function readFlowFile(text: string, fileName: string): { name: string; graph: Graph } {
  let parsed: unknown;
  try { parsed = JSON.parse(text); } catch { throw new Error(`${fileName} is not JSON`); }
  const given = parsed as { name?: unknown; graph?: unknown } | null;
  const fallback = fileName.replace(/\.json$/i, "");
  if (given && typeof given === "object" && given.graph !== undefined) {
    return { name: typeof given.name === "string" ? given.name : fallback, graph: given.graph as Graph };
  }
  return { name: fallback, graph: parsed as Graph };
}

export const author = {
  get: (): string => localStorage.getItem("stitch-author") || "console",
  set: (name: string) => localStorage.setItem("stitch-author", name),
};
