// The four node types, to drag onto the canvas (or click: placed next to the selected or last
// node, where there is room; see placement.ts).
import { memo } from "react";
import { NODE_KINDS, type NodeKind } from "../api";

export const DRAG_TYPE = "application/x-stitch-node";

const HINTS: Record<NodeKind, string> = {
  Worker: "Calls a webhook and waits for its callback",
  UX: "Waits for a person to fill in a form",
  Splitter: "Runs what follows once per array element",
  Collector: "Gathers a Splitter's paths into an array",
};

export const Palette = memo(function Palette({ onAdd }: { onAdd: (kind: NodeKind) => void }) {
  return (
    <div className="palette" data-testid="palette">
      {NODE_KINDS.map((kind) => (
        <div key={kind} className={`palette-item type-${kind}`} data-testid={`palette-${kind}`} draggable title={HINTS[kind]}
             role="button" tabIndex={0}
             onDragStart={(e) => { e.dataTransfer.setData(DRAG_TYPE, kind); e.dataTransfer.effectAllowed = "move"; }}
             onClick={() => onAdd(kind)} onKeyDown={(e) => { if (e.key === "Enter") onAdd(kind); }}>
          <b>{kind === "UX" ? "UX gate" : kind}</b>
          <small>{HINTS[kind]}</small>
        </div>
      ))}
    </div>
  );
});
