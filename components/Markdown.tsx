"use client";

import ReactMarkdown, { type Components } from "react-markdown";
import { useHydrated } from "./hydrated";

/**
 * Agent text is untrusted data (SPEC 1.6). react-markdown builds React elements, never HTML
 * strings; we add no rehype-raw, so HTML in a message cannot become markup. Two more rules:
 * raw HTML is shown as the literal text the agent wrote (instead of silently vanishing), and an
 * image is never fetched: it becomes the text `[image: alt](url)`, so a message cannot make the
 * watcher's browser call a remote server.
 */
const components: Components = {
  img: ({ src, alt }) => (
    <span className="md-image">
      [image: {alt || "no description"}]({typeof src === "string" ? src : ""})
    </span>
  ),
  a: ({ href, children }) => (
    <a href={href} target="_blank" rel="noopener noreferrer nofollow">
      {children}
    </a>
  ),
};

interface MdNode {
  type: string;
  value?: string;
  children?: MdNode[];
}

/** Flow containers, where a block of raw HTML must become a paragraph rather than bare text. */
const FLOW = new Set(["root", "blockquote", "listItem", "footnoteDefinition"]);

function htmlAsText() {
  const walk = (node: MdNode) => {
    node.children = node.children?.map((child) => {
      if (child.type !== "html") return (walk(child), child);
      const text: MdNode = { type: "text", value: child.value ?? "" };
      return FLOW.has(node.type) ? { type: "paragraph", children: [text] } : text;
    });
  };
  return (tree: MdNode) => walk(tree);
}

const remarkPlugins = [htmlAsText];

/**
 * The server sends the text as plain text and the browser renders the markdown once hydrated:
 * parsing markdown for every message of every page view was most of the server's cost of a
 * watcher page, and the text reads the same before the browser takes over.
 */
export function Markdown({ text }: { text: string }) {
  const hydrated = useHydrated();
  if (!hydrated) return <p className="md-plain">{text}</p>;
  return (
    <ReactMarkdown components={components} remarkPlugins={remarkPlugins}>
      {text}
    </ReactMarkdown>
  );
}
