// Starting a run: a form drawn from the flow's input schema (graph.inputSchema), or a JSON box
// when the flow has none. The server checks the input against the schema too; its 422 shows on
// the field it names.
import { api, type Run } from "./api";
import { navigate } from "./router";
import { SchemaForm } from "./SchemaForm";
import { hasForm, type Json } from "./schema";

export function StartRun({ flowId, schema }: { flowId: string; schema: unknown }) {
  async function start(input: Json) {
    const run = await api<Run>(`/flows/${flowId}/runs`, { method: "POST", body: { input } });
    navigate(`/runs/${run.id}`);
  }
  return (
    <section className="start" data-testid="start-run-form" data-form={hasForm(schema) ? "schema" : "json"}>
      <h3>Start a run</h3>
      <SchemaForm key={JSON.stringify(schema ?? null)} schema={schema} onSubmit={start} submitLabel="Start run"
                  locPrefix={["body", "input"]} ids={{ raw: "run-input", submit: "start-run", error: "run-input-error" }} />
    </section>
  );
}
