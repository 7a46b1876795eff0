// Completing a waiting UX gate: the form its input schema draws (Approve / Reject when it says
// so), or a JSON box when it has none. The server checks the output against the schema too.
import { api, type Reply } from "./api";
import { SchemaForm } from "./SchemaForm";
import type { Json } from "./schema";

export function GateForm({ runId, nodeKey, schema, onDone }: { runId: string; nodeKey: string; schema: unknown; onDone: () => void }) {
  async function complete(value: Json) {
    await api<Reply>(`/complete/${runId}/${encodeURIComponent(nodeKey)}`, { method: "POST", body: value });
    onDone();
  }
  return (
    <SchemaForm key={`${runId}/${nodeKey}/${JSON.stringify(schema ?? null)}`} schema={schema} onSubmit={complete} submitLabel="Complete"
                locPrefix={["body"]} ids={{ raw: "gate-input", submit: "complete-gate", error: "gate-error" }} />
  );
}
