"use client";

import { useEffect, useState } from "react";

/**
 * Copies `text` to the clipboard. Where the Clipboard API is missing or refused (plain http, old
 * browsers), it selects the element `selectId` so the person can press Ctrl+C / ⌘C themselves.
 */
export function CopyButton({ text, selectId, label = "Copy" }: { text: string; selectId?: string; label?: string }) {
  const [state, setState] = useState<"idle" | "copied" | "selected">("idle");

  useEffect(() => {
    if (state === "idle") return;
    const timer = setTimeout(() => setState("idle"), 2500);
    return () => clearTimeout(timer);
  }, [state]);

  async function copy() {
    try {
      await navigator.clipboard.writeText(text);
      setState("copied");
    } catch {
      const el = selectId ? document.getElementById(selectId) : null;
      const selection = window.getSelection();
      if (el && selection) {
        const range = document.createRange();
        range.selectNodeContents(el);
        selection.removeAllRanges();
        selection.addRange(range);
      }
      setState("selected");
    }
  }

  return (
    <button type="button" className="btn btn-small" onClick={copy} aria-live="polite">
      {state === "copied" ? "Copied ✓" : state === "selected" ? "Selected: press Ctrl+C" : label}
    </button>
  );
}
