// The designer's edits, each one step of undo (a drag: one step, when it stops), and the keys
// that make them: Delete/Backspace, Ctrl+Z, Ctrl+Shift+Z (Ctrl+Y), Ctrl+C, Ctrl+V.
import {
  applyEdgeChanges, applyNodeChanges, type Connection, type EdgeChange, type FinalConnectionState, type NodeChange, type ReactFlowInstance,
} from "@xyflow/react";
import { useCallback, useEffect, useRef, type DragEvent } from "react";
import type { NodeKind, Problem, XY } from "../api";
import type { JsonObject } from "../schema";
import { freshId, ghost, isDesign, newEdge, newNode, settle, stemOf, type AnyNode, type DataMap, type DesignEdge, type DesignNode, type Doc } from "./model";
import { DRAG_TYPE } from "./Palette";
import { NODE_SIZE, placeNode, type Box } from "./placement";
import type { History } from "./useHistory";

function editable(target: EventTarget | null): boolean {
  const element = target as HTMLElement | null;
  return !!element && (element.isContentEditable || ["INPUT", "TEXTAREA", "SELECT"].includes(element.tagName));
}

/** A node's box on the canvas: its measured size once React Flow has drawn it. */
function boxOf(node: AnyNode): Box {
  return {
    x: node.position.x, y: node.position.y,
    width: node.measured?.width ?? node.width ?? NODE_SIZE.width, height: node.measured?.height ?? node.height ?? NODE_SIZE.height,
  };
}

/** Whether a drag moved anything (React Flow also reports a click's selection as changes). */
function moved(before: Doc, after: Doc): boolean {
  if (before.nodes.length !== after.nodes.length) return true;
  return before.nodes.some((n, i) => after.nodes[i].position.x !== n.position.x || after.nodes[i].position.y !== n.position.y);
}

export function useEdits({ change, current, recordFrom, undo, redo }: History, flow: ReactFlowInstance<AnyNode, DesignEdge>) {
  const dragFrom = useRef<Doc | null>(null);
  const clipboard = useRef<{ nodes: DesignNode[]; edges: DesignEdge[]; pasted: number } | null>(null);

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
    // Next to the selection or the last node, in view when there is room, never on another node.
    const d = current();
    const box = document.querySelector(".designer-canvas")?.getBoundingClientRect();
    const corner = box && flow.screenToFlowPosition({ x: box.left, y: box.top });
    const far = box && flow.screenToFlowPosition({ x: box.right, y: box.bottom });
    const view = corner && far ? { x: corner.x, y: corner.y, width: far.x - corner.x, height: far.y - corner.y } : undefined;
    const near = at ?? (view ? { x: view.x + view.width / 2, y: view.y + view.height / 2 } : { x: 0, y: 0 });
    const designs = d.nodes.filter(isDesign);
    const anchor = at ? null : (designs.filter((n) => n.selected).at(-1) ?? designs.at(-1) ?? null);
    const spot = placeNode({ boxes: d.nodes.map(boxOf), anchor: anchor && boxOf(anchor), near, view });
    change((doc) => {
      const node = newNode(kind, freshId(stemOf(kind), doc), spot);
      return { ...doc, nodes: [...doc.nodes.map((n) => (n.selected ? { ...n, selected: false } : n)), node], edges: doc.edges.map((e) => (e.selected ? { ...e, selected: false } : e)) };
    });
    if (view && !(spot.x >= view.x && spot.y >= view.y && spot.x + NODE_SIZE.width <= view.x + view.width && spot.y + NODE_SIZE.height <= view.y + view.height)) {
      window.setTimeout(() => void flow.fitView({ padding: 0.2, maxZoom: 1.2 }), 50);  // no room in view: show it
    }
  }, [change, current, flow]);
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

  return {
    onNodesChange, onEdgesChange, onNodeDragStart, onNodeDragStop, onConnect, onConnectEnd, onReconnect,
    add, onDrop, remove, copy, paste, onData, onRename, onSchema, pick,
  };
}
