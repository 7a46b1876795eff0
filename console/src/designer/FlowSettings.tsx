// The side panel when no node is selected: the flow's input form (graph.inputSchema), from which
// the flow page draws the form that starts a run.
import { memo } from "react";
import { SchemaEditor } from "../SchemaEditor";
import type { JsonObject } from "../schema";

export const FlowSettings = memo(function FlowSettings({ schema, onSchema, nodeCount, edgeCount }: {
  schema: unknown; onSchema: (schema: JsonObject | undefined) => void; nodeCount: number; edgeCount: number;
}) {
  return (
    <aside className="panel designer-panel" data-testid="flow-settings">
      <h3>Flow <small>{nodeCount} nodes · {edgeCount} edges</small></h3>
      <p className="hint">Select a node to edit it. Drag nodes from the palette; connect a node's right handle to another's left.</p>
      <h4>Run input form</h4>
      <p className="hint">The fields asked for when a run starts (the flow's <code>inputSchema</code>); without any, a run starts with JSON.</p>
      <SchemaEditor schema={schema} testId="flow-schema" onChange={onSchema} />
    </aside>
  );
});
