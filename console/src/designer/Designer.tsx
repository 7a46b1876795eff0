// The flow designer: a palette, an editable React Flow canvas, the selected node's panel, and
// the server's verdict on the graph as drawn (problems on their nodes and edges, and listed).
// Saving sends the graph to the server (POST for a new flow, PUT for a new version); its 422
// shows the same way. Undo/redo, copy/paste, delete: buttons and the usual keys.
import {
  applyEdgeChanges, applyNodeChanges, Background, Controls, ReactFlow, ReactFlowProvider, useReactFlow,
  type Connection, type EdgeChange, type FinalConnectionState, type NodeChange,
} from "@xyflow/react";
import { useCallback, useDeferredValue, useEffect, useMemo, useRef, useState, type DragEvent } from "react";
import { api, author as authorStore, download, readFlowFile, type Flow, type NodeKind, type Problem, type XY } from "../api";
import { onLink } from "../router";
import type { JsonObject } from "../schema";
import { FlowSettings } from "./FlowSettings";
import {
  fromGraph, freshId, ghost, isDesign, newEdge, newNode, settle, stemOf, toGraph,
  type AnyNode, type DataMap, type DesignEdge, type DesignNode, type Doc,
} from "./model";
import { NodeEditor } from "./NodeEditor";
import { DRAG_TYPE, Palette } from "./Palette";
import { edgeTypes, MarksContext, marksOf, nodeTypes, type Mark } from "./parts";
import { ProblemsList } from "./ProblemsList";
import { useHistory } from "./useHistory";
import { problemsOf, useValidation } from "./useValidation";

interface Saved { version: number; revision: number }
interface SaveFailure { revision: number; message: string; problems: Problem[] }

function editable(target: EventTarget | null): boolean {
  const element = target as HTMLElement | null;
  return !!element && (element.isContentEditable || ["INPUT", "TEXTAREA", "SELECT"].includes(element.tagName));
}

/** Whether a drag moved anything (React Flow also reports a click's selection as changes). */
function moved(before: Doc, after: Doc): boolean {
  if (before.nodes.length !== after.nodes.length) return true;
  return before.nodes.some((n, i) => after.nodes[i].position.x !== n.position.x || after.nodes[i].position.y !== n.position.y);
}

function Designer({ initial, flowId: givenId, version: baseVersion }: { initial: Doc; flowId: string | null; version: number | null }) {
  const { doc, change, revision, current, recordFrom, undo, redo, canUndo, canRedo } = useHistory(() => initial);
  const flow = useReactFlow<AnyNode, DesignEdge>();
  const [flowId, setFlowId] = useState(givenId);
  const [who, setWho] = useState(authorStore.get);
  const [saving, setSaving] = useState(false);
  const [saved, setSaved] = useState<Saved | null>(null);
  const [failure, setFailure] = useState<SaveFailure | null>(null);
  const dragFrom = useRef<Doc | null>(null);
  const clipboard = useRef<{ nodes: DesignNode[]; edges: DesignEdge[]; pasted: number } | null>(null);
  const checked = useValidation(() => toGraph(current()), revision);
  const stale = checked.revision !== revision;

  // Kept identical while nothing changes them: a new value re-renders every node and edge.
  const saveProblems = failure && failure.revision === revision ? failure.problems : NONE;
  const marks = useMemo(() => marksOf([...saveProblems, ...(checked.validation?.problems ?? [])], checked.validation?.warnings ?? []),
    [checked.validation, saveProblems]);

  // -- editing ---------------------------------------------------------------------------------
  const onNodesChange = useCallback((changes: NodeChange<AnyNode>[]) => {
    change((d) => ({ ...d, nodes: applyNodeChanges(changes.filter((c) => c.type !== "remove"), d.nodes) }), "silent");
  }, [change]);
  const onEdgesChange = useCallback((changes: EdgeChange<DesignEdge>[]) => {
    change((d) => ({ ...d, edges: applyEdgeChanges(changes.filter((c) => c.type !== "remove"), d.edges) }), "silent");
  }, [change]);
  const onNodeDragStart = useCallback(() => { dragFrom.current = current(); }, [current]);
  const onNodeDragStop = useCallback(() => {
    const before = dragFrom.current;
    dragFrom.current = null;
    if (before && moved(before, current())) recordFrom(before);
  }, [current, recordFrom]);
  const connect = useCallback((source: string, target: string) => {
    change((d) => (d.edges.some((e) => e.source === source && e.target === target) ? d
      : settle({ ...d, edges: [...d.edges, newEdge(source, target, d.edges)] })));
  }, [change]);
  const onConnect = useCallback((c: Connection) => connect(c.source, c.target), [connect]);
  const onConnectEnd = useCallback((event: MouseEvent | TouchEvent, state: FinalConnectionState) => {
    if (state.isValid || !state.fromNode || !state.fromHandle) return;
    const from = state.fromNode.id;
    const outgoing = state.fromHandle.type === "source";
    const onNode = (event.target as Element | null)?.closest?.(".react-flow__node")?.getAttribute("data-id");
    if (onNode && onNode !== from && current().nodes.some((n) => n.id === onNode && isDesign(n))) {
      connect(outgoing ? from : onNode, outgoing ? onNode : from);  // dropped on a node's body: connect to it
      return;
    }
    if (!(event.target as Element | null)?.classList?.contains("react-flow__pane")) return;
    const point = "changedTouches" in event ? event.changedTouches[0] : event;
    const at = flow.screenToFlowPosition({ x: point.clientX, y: point.clientY });
    change((d) => {  // dropped on the empty canvas: an edge to a missing node, drawn to a ghost end
      const id = freshId("missing", d);
      const edge = outgoing ? newEdge(from, id, d.edges) : newEdge(id, from, d.edges);
      return { ...d, nodes: [...d.nodes, ghost(id, { x: at.x - 40, y: at.y - 16 })], edges: [...d.edges, edge] };
    });
  }, [change, connect, current, flow]);
  const onReconnect = useCallback((old: DesignEdge, c: Connection) => {
    change((d) => settle({
      ...d,
      edges: d.edges.map((e) => {
        if (e.id !== old.id) return e;
        const extra = { ...(e.data?.extra ?? {}) };
        if (c.source !== e.source) delete extra.sourceHandle;
        if (c.target !== e.target) delete extra.targetHandle;
        return { ...e, source: c.source, target: c.target, data: { extra } };
      }),
    }));
  }, [change]);

  const add = useCallback((kind: NodeKind, at?: XY) => {
    const spot = at ?? (() => {
      const box = document.querySelector(".designer-canvas")?.getBoundingClientRect();
      return flow.screenToFlowPosition({ x: (box?.left ?? 0) + (box?.width ?? 600) / 2, y: (box?.top ?? 0) + (box?.height ?? 400) / 2 });
    })();
    change((d) => {
      const node = newNode(kind, freshId(stemOf(kind), d), { x: spot.x - 75, y: spot.y - 25 });
      return { ...d, nodes: [...d.nodes.map((n) => (n.selected ? { ...n, selected: false } : n)), node], edges: d.edges.map((e) => (e.selected ? { ...e, selected: false } : e)) };
    });
  }, [change, flow]);
  const onDrop = useCallback((event: DragEvent) => {
    const kind = event.dataTransfer.getData(DRAG_TYPE) as NodeKind;
    if (!kind) return;
    event.preventDefault();
    add(kind, flow.screenToFlowPosition({ x: event.clientX, y: event.clientY }));
  }, [add, flow]);

  const remove = useCallback(() => {
    change((d) => {
      const gone = new Set(d.nodes.filter((n) => n.selected).map((n) => n.id));
      const ghosts = new Set(d.nodes.filter((n) => n.selected && !isDesign(n)).map((n) => n.id));
      const edges = d.edges.filter((e) => !e.selected && !ghosts.has(e.source) && !ghosts.has(e.target));
      if (gone.size === 0 && edges.length === d.edges.length) return d;
      const ends = new Set(edges.flatMap((e) => [e.source, e.target]));
      // A deleted node's edges stay, drawn to a ghost where it was, until reconnected or deleted.
      const nodes = d.nodes.flatMap((n): AnyNode[] => (!gone.has(n.id) ? [n] : isDesign(n) && ends.has(n.id) ? [ghost(n.id, n.position)] : []));
      return settle({ ...d, nodes, edges });
    });
  }, [change]);
  const copy = useCallback(() => {
    const d = current();
    const nodes = d.nodes.filter((n): n is DesignNode => isDesign(n) && !!n.selected);
    if (!nodes.length) return;
    const ids = new Set(nodes.map((n) => n.id));
    clipboard.current = { nodes, edges: d.edges.filter((e) => ids.has(e.source) && ids.has(e.target)), pasted: 0 };
  }, [current]);
  const paste = useCallback(() => {
    const held = clipboard.current;
    if (!held) return;
    held.pasted += 1;
    const shift = 40 * held.pasted;
    change((d) => {
      const renamed = new Map<string, string>();
      const taken = new Set<string>();
      for (const n of held.nodes) {
        const id = freshId(n.id.replace(/\d+$/, "") || stemOf(n.data.kind), d, taken);
        taken.add(id);
        renamed.set(n.id, id);
      }
      const nodes = held.nodes.map((n): DesignNode => ({
        id: renamed.get(n.id)!, type: "design", selected: true, position: { x: n.position.x + shift, y: n.position.y + shift },
        data: { ...n.data, data: structuredClone(n.data.data), extra: structuredClone(n.data.extra) },
      }));
      let edges = d.edges.map((e) => (e.selected ? { ...e, selected: false } : e));
      for (const e of held.edges) {
        const copyOf = newEdge(renamed.get(e.source)!, renamed.get(e.target)!, edges);
        edges = [...edges, { ...copyOf, data: { extra: structuredClone(e.data?.extra ?? {}) } }];
      }
      return { ...d, nodes: [...d.nodes.map((n) => (n.selected ? { ...n, selected: false } : n)), ...nodes], edges };
    });
  }, [change]);
  const onData = useCallback((id: string, update: (data: DataMap) => DataMap, field: string) => {
    change((d) => ({ ...d, nodes: d.nodes.map((n) => (n.id === id && isDesign(n) ? { ...n, data: { ...n.data, data: update(n.data.data) } } : n)) }), { coalesce: field });
  }, [change]);
  const onRename = useCallback((from: string, to: string): string | null => {
    if (!to) return "A node needs an id.";
    if (current().nodes.some((n) => n.id === to && isDesign(n))) return `${to} is taken.`;
    change((d) => settle({
      ...d,
      nodes: d.nodes.filter((n) => n.id !== to).map((n) => (n.id === from ? { ...n, id: to } : n)),  // a ghost of that id: now connected
      edges: d.edges.map((e) => (e.source === from || e.target === from
        ? { ...e, source: e.source === from ? to : e.source, target: e.target === from ? to : e.target } : e)),
    }));
    return null;
  }, [change, current]);
  const onSchema = useCallback((schema: JsonObject | undefined) => {
    change((d) => {
      const rest = { ...d.rest };
      if (schema === undefined) delete rest.inputSchema; else rest.inputSchema = schema;
      return { ...d, rest };
    }, { coalesce: "inputSchema" });
  }, [change]);
  const pick = useCallback((p: Problem) => {
    change((d) => ({
      ...d,
      nodes: d.nodes.map((n) => ((n.id === p.node_id) !== !!n.selected ? { ...n, selected: n.id === p.node_id } : n)),
      edges: d.edges.map((e) => ((e.id === p.edge_id) !== !!e.selected ? { ...e, selected: e.id === p.edge_id } : e)),
    }), "silent");
    const edge = p.edge_id ? current().edges.find((e) => e.id === p.edge_id) : undefined;
    const focus = p.node_id ? [p.node_id] : edge ? [edge.source, edge.target] : [];
    if (focus.length) void flow.fitView({ nodes: focus.map((id) => ({ id })), duration: 300, maxZoom: 1.2, padding: 0.5 });
  }, [change, current, flow]);

  // -- keys ------------------------------------------------------------------------------------
  useEffect(() => {
    const onKey = (event: KeyboardEvent) => {
      if (editable(event.target)) return;
      const mod = event.ctrlKey || event.metaKey;
      const key = event.key.toLowerCase();
      if (key === "delete" || key === "backspace") remove();
      else if (mod && key === "z" && event.shiftKey) redo();
      else if (mod && (key === "z" || key === "y")) (key === "y" ? redo : undo)();
      else if (mod && key === "c") copy();
      else if (mod && key === "v") paste();
      else return;
      event.preventDefault();
    };
    window.addEventListener("keydown", onKey);
    return () => window.removeEventListener("keydown", onKey);
  }, [remove, copy, paste, undo, redo]);

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
               onDrop={onDrop}>
            <ReactFlow<AnyNode, DesignEdge> nodes={doc.nodes} edges={doc.edges} nodeTypes={nodeTypes} edgeTypes={edgeTypes}
                       onNodesChange={onNodesChange} onEdgesChange={onEdgesChange} onConnect={onConnect} onConnectEnd={onConnectEnd}
                       onReconnect={onReconnect} onNodeDragStart={onNodeDragStart} onNodeDragStop={onNodeDragStop}
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
