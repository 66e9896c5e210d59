type Child = Node | string | null | undefined | false;

/** Creates an element with attributes (`class`, `aria-*`, …; `text` sets its text) and children. */
export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attributes: Record<string, string | boolean | undefined> = {},
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === undefined || value === false) continue;
    if (name === "text") element.textContent = String(value);
    else element.setAttribute(name, value === true ? "" : value);
  }
  for (const child of children) if (child) element.append(child);
  return element;
}

/** A table with a caption, header cells and rows of cells; `numeric` columns are right-aligned. */
export function table(
  caption: string,
  headers: string[],
  rows: Child[][],
  numeric: number[] = [],
): HTMLTableElement {
  const cell = (tag: "th" | "td", content: Child, index: number) =>
    h(
      tag,
      { class: numeric.includes(index) ? "num" : undefined, scope: tag === "th" ? "col" : undefined },
      content,
    );
  return h(
    "table",
    {},
    h("caption", { text: caption }),
    h("thead", {}, h("tr", {}, ...headers.map((header, i) => cell("th", header, i)))),
    h("tbody", {}, ...rows.map((row) => h("tr", {}, ...row.map((content, i) => cell("td", content, i))))),
  );
}

/** A section card with its heading; the heading's id labels the section. */
export function card(id: string, title: string): { section: HTMLElement; body: HTMLDivElement } {
  const body = h("div", { class: "card-body", "aria-live": "polite" });
  const section = h(
    "section",
    { id, class: "card", "aria-labelledby": `${id}-title` },
    h("h2", { id: `${id}-title`, text: title }),
    body,
  );
  return { section, body };
}

/** Replaces what `container` shows. */
export function show(container: Element, ...children: Child[]): void {
  container.replaceChildren(...children.filter((child): child is Node | string => Boolean(child)));
}
