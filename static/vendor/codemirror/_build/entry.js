// The studio's CodeMirror bundle: refresh.sh bundles this file with esbuild
// into ../codemirror.js, one IIFE that defines the global RookeryCM.
// static/editor.js uses only what is exported here.
export { EditorView, keymap, Decoration, ViewPlugin, WidgetType, hoverTooltip } from "@codemirror/view";
export { EditorState, StateField, StateEffect, RangeSetBuilder, Compartment } from "@codemirror/state";
export { basicSetup } from "codemirror";
export { json } from "@codemirror/lang-json";
export { linter, lintGutter, setDiagnostics } from "@codemirror/lint";
export { syntaxTree } from "@codemirror/language";
export { MergeView } from "@codemirror/merge";
