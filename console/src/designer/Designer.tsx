// The flow designer: a palette, an editable React Flow canvas, the selected node's panel, and
// the server's verdict on the graph as drawn (problems on their nodes and edges, and listed).
// Saving sends the graph to the server (POST for a new flow, PUT for a new version); its 422
// shows the same way. Undo/redo, copy/paste, delete: buttons and the usual keys.
import { Background, Controls, ReactFlow, ReactFlowProvider, useReactFlow } from "@xyflow/react";
import { useDeferredValue, useMemo, useState } from "react";
import { api, author as authorStore, download, readFlowFile, type Flow, type Problem } from "../api";
import { onLink } from "../router";
import { FlowSettings } from "./FlowSettings";
import { fromGraph, isDesign, toGraph, type AnyNode, type DesignEdge, type DesignNode, type Doc } from "./model";
import { NodeEditor } from "./NodeEditor";
import { DRAG_TYPE, Palette } from "./Palette";
import { edgeTypes, MarksContext, marksOf, nodeTypes, type Mark } from "./parts";
import { ProblemsList } from "./ProblemsList";
import { useEdits } from "./useEdits";
import { useHistory } from "./useHistory";
import { problemsOf, useValidation } from "./useValidation";

interface Saved { version: number; revision: number }
interface SaveFailure { revision: number; message: string; problems: Problem[] }

function Designer({ initial, flowId: givenId, version: baseVersion }: { initial: Doc; flowId: string | null; version: number | null }) {
  const history = useHistory(() => initial);
  const { doc, change, revision, current, undo, redo, canUndo, canRedo } = history;
  const flow = useReactFlow<AnyNode, DesignEdge>();
  const [flowId, setFlowId] = useState(givenId);
  const [who, setWho] = useState(authorStore.get);
  const [saving, setSaving] = useState(false);
  const [saved, setSaved] = useState<Saved | null>(null);
  const [failure, setFailure] = useState<SaveFailure | null>(null);
  const checked = useValidation(() => toGraph(current()), revision);
  const stale = checked.revision !== revision;

  // Kept identical while nothing changes them: a new value re-renders every node and edge.
  const saveProblems = failure && failure.revision === revision ? failure.problems : NONE;
  const marks = useMemo(() => marksOf([...saveProblems, ...(checked.validation?.problems ?? [])], checked.validation?.warnings ?? []),
    [checked.validation, saveProblems]);

  const edits = useEdits(history, flow);
  const { add, remove, copy, paste, onData, onRename, onSchema, pick } = edits;

  // -- saving ----------------------------------------------------------------------------------
  async function save() {
    const d = current();
    const at = revision;
    setSaving(true);
    setFailure(null);
    try {
      const body = { name: d.name.trim(), graph: toGraph(d), author: who.trim() || "console" };
      const reply = flowId
        ? await api<Flow>(`/flows/${flowId}`, { method: "PUT", body })
        : await api<Flow>("/flows", { method: "POST", body });
      if (!flowId) {
        setFlowId(reply.id);
        window.history.replaceState(null, "", `/flows/${reply.id}/edit`);  // later saves are new versions of it
      }
      setSaved({ version: reply.version, revision: at });
    } catch (e) {
      setFailure({ revision: at, message: (e as Error).message, problems: problemsOf(e) });
    } finally {
      setSaving(false);
    }
  }

  function importFile(file: File) {
    void file.text().then((text) => {
      try {
        const { name, graph } = readFlowFile(text, file.name);
        change(() => fromGraph(graph, name));
        setFailure(null);
        window.setTimeout(() => void flow.fitView({ padding: 0.2, maxZoom: 1.2 }), 50);
      } catch (e) {
        setFailure({ revision, message: (e as Error).message, problems: [] });
      }
    });
  }

  // -- what is shown ---------------------------------------------------------------------------
  const selected = doc.nodes.filter((n) => n.selected);
  const selectedNode = selected.length === 1 && isDesign(selected[0]) ? selected[0] : null;
  const selectedEdges = doc.edges.filter((e) => e.selected).length;
  // The panel follows a new selection in a render of its own, after the canvas's: a drag that
  // selects a node moves it at once. Edits in the panel show at once (only the id is deferred).
  const shownId = useDeferredValue(selectedNode?.id ?? null);
  const editing = shownId === null ? null : (doc.nodes.find((n): n is DesignNode => n.id === shownId && isDesign(n)) ?? null);
  const collector = editing?.data.kind === "Collector" ? editing.id : null;
  const splitters = useMemo(() => {  // for the Collector's panel: the Splitters upstream of it
    if (collector === null) return NONE_IDS;
    const d = current();
    const kinds = new Map(d.nodes.filter(isDesign).map((n) => [n.id, n.data.kind]));
    const found: string[] = [];
    const seen = new Set<string>();
    const walk = (id: string) => {
      for (const e of d.edges) {
        if (e.target !== id || seen.has(e.source)) continue;
        seen.add(e.source);
        if (kinds.get(e.source) === "Splitter") found.push(e.source); else walk(e.source);
      }
    };
    walk(collector);
    return found;
  }, [collector, doc.edges, current]);
  const designNodes = doc.nodes.filter(isDesign).length;
  const invalid = !stale && !checked.pending && checked.validation?.valid === false;
  const dirty = saved ? saved.revision !== revision : true;
  const noName = !doc.name.trim();

  return (
    <div className="designer" data-testid="designer" data-revision={revision} data-checked={stale || checked.pending ? "pending" : "done"}>
      <div className="toolbar designer-toolbar">
        <input className="flow-name" data-testid="flow-name" value={doc.name} placeholder="Flow name" aria-label="Flow name"
               onChange={(e) => { const name = e.target.value; change((d) => ({ ...d, name }), { coalesce: "name" }); }} />
        <button data-testid="undo" disabled={!canUndo} onClick={undo} title="Undo (Ctrl+Z)">Undo</button>
        <button data-testid="redo" disabled={!canRedo} onClick={redo} title="Redo (Ctrl+Shift+Z)">Redo</button>
        <button data-testid="delete-selection" disabled={!selected.length && !selectedEdges} onClick={remove} title="Delete (Del)">Delete</button>
        <button data-testid="copy" disabled={!selected.some(isDesign)} onClick={copy} title="Copy (Ctrl+C)">Copy</button>
        <button data-testid="paste" onClick={paste} title="Paste (Ctrl+V)">Paste</button>
        <label className="button">Import…
          <input type="file" accept=".json,application/json" data-testid="designer-import" hidden
                 onChange={(e) => { const f = e.target.files?.[0]; e.target.value = ""; if (f) importFile(f); }} />
        </label>
        <button data-testid="designer-export" onClick={() => download({ name: doc.name, graph: toGraph(current()) }, doc.name)}>Export</button>
        <span className="spacer" />
        <label className="author">Author <input data-testid="author" value={who} size={10}
               onChange={(e) => { setWho(e.target.value); authorStore.set(e.target.value.trim() || "console"); }} /></label>
        <button className="primary" data-testid="save-flow" onClick={() => void save()}
                disabled={saving || noName || invalid}
                title={noName ? "Name the flow first" : invalid ? "Fix the problems the server found first" : "Save a new version"}>
          {saving ? "Saving…" : flowId ? "Save version" : "Save flow"}
        </button>
        {flowId && <a href={`/flows/${flowId}`} onClick={onLink} data-testid="open-flow">Flow page →</a>}
      </div>
      <div className="save-line" data-testid="save-status" data-saved={saved && !dirty ? String(saved.version) : ""}>
        {failure ? <span className="error" data-testid="save-error">Not saved: {failure.message}</span>
          : saved ? (dirty ? `Version ${saved.version} saved; changed since.` : `Version ${saved.version} saved.`)
          : baseVersion ? `Editing version ${baseVersion}; saving makes a new version.` : "Not saved yet."}
      </div>
      <div className="designer-body">
        <Palette onAdd={add} />
        <MarksContext.Provider value={marks}>
          <div className="designer-canvas" data-testid="designer-canvas"
               onDragOver={(e) => { if (e.dataTransfer.types.includes(DRAG_TYPE)) { e.preventDefault(); e.dataTransfer.dropEffect = "move"; } }}
               onDrop={edits.onDrop}>
            <ReactFlow<AnyNode, DesignEdge> nodes={doc.nodes} edges={doc.edges} nodeTypes={nodeTypes} edgeTypes={edgeTypes}
                       onNodesChange={edits.onNodesChange} onEdgesChange={edits.onEdgesChange} onConnect={edits.onConnect}
                       onConnectEnd={edits.onConnectEnd} onReconnect={edits.onReconnect}
                       onNodeDragStart={edits.onNodeDragStart} onNodeDragStop={edits.onNodeDragStop}
                       deleteKeyCode={null} fitView fitViewOptions={FIT} minZoom={0.05}
                       defaultEdgeOptions={EDGE_OPTIONS} proOptions={PRO}>
              <Background />
              <Controls showInteractive={false} />
            </ReactFlow>
          </div>
        </MarksContext.Provider>
        <div className="designer-side">
          {editing
            ? <NodeEditor key={editing.id} id={editing.id} kind={editing.data.kind} data={editing.data.data}
                          marks={marks.nodes.get(editing.id) ?? NO_MARKS} splitters={splitters}
                          onData={onData} onRename={onRename} onDelete={remove} />
            : <FlowSettings schema={doc.rest.inputSchema} onSchema={onSchema} nodeCount={designNodes} edgeCount={doc.edges.length} />}
          <ProblemsList checked={checked} stale={stale} saveProblems={saveProblems} onPick={pick} />
        </div>
      </div>
    </div>
  );
}

// Props React Flow compares by identity: made once, so a render (each drag step) changes none.
const NONE: Problem[] = [];
const NO_MARKS: Mark[] = [];
const NONE_IDS: string[] = [];
const FIT = { padding: 0.2, maxZoom: 1.2 };
const EDGE_OPTIONS = { type: "design" };
const PRO = { hideAttribution: true };

export function DesignerView(props: { initial: Doc; flowId: string | null; version: number | null }) {
  return <ReactFlowProvider><Designer {...props} /></ReactFlowProvider>;
}
