import type { Listing, TableNotes } from "../answers.js";
import { ApiError, type Credentials, providerApi } from "../api.js";
import { h, show } from "../dom.js";

/** A name as SQL writes it: quoted unless it is a plain lower-case identifier. */
function sqlName(name: string): string {
  return /^[a-z_][a-z0-9_$]*$/.test(name) ? name : `"${name.replace(/"/g, '""')}"`;
}

/** A table as the listing names it: without `public.`, as a provider usually writes it. */
function tableKey(schema: string, name: string): string {
  return schema === "public" ? sqlName(name) : `${sqlName(schema)}.${sqlName(name)}`;
}

/** The notes the listing holds for a table, under its short or qualified name. */
function notesOf(listing: Listing, schema: string, name: string): TableNotes {
  return (
    listing.tableDescriptions[tableKey(schema, name)] ??
    listing.tableDescriptions[`${sqlName(schema)}.${sqlName(name)}`] ??
    {}
  );
}

/** One table of the form: whether the catalog shows it, its description and its columns'. */
interface TableRow {
  key: string;
  element: HTMLElement;
  shown: HTMLInputElement;
  description: HTMLInputElement;
  columns: Map<string, HTMLInputElement>;
}

/**
 * The catalog listing: whether the provider is listed, its name, description and tags, and per table (as last
 * read from its database) whether the catalog shows it and what it says of it and of its columns. Saved with
 * PUT /api/providers/:id/listing, which reads the tables again; what the gateway refuses is said under the form
 * and the field it names gets focus.
 */
export function renderListingForm(
  container: Element,
  credentials: Credentials,
  listing: Listing,
  note = "",
): void {
  const status = h("p", { class: "status", role: "status", id: "listing-status", text: note });
  const listed = h("input", {
    id: "listing-listed",
    type: "checkbox",
    "aria-describedby": "listing-listed-hint",
  });
  listed.checked = listing.listed;
  const name = h("input", { id: "listing-name", type: "text", maxlength: "100" });
  name.value = listing.name;
  const description = h("textarea", { id: "listing-description", rows: "3", maxlength: "2000" });
  description.value = listing.description;
  const tags = h("input", {
    id: "listing-tags",
    type: "text",
    spellcheck: "false",
    "aria-describedby": "listing-tags-hint",
  });
  tags.value = listing.tags.join(", ");

  const rows = listing.tables.map((table): TableRow => {
    const key = tableKey(table.schema, table.name);
    const notes = notesOf(listing, table.schema, table.name);
    const shown = h("input", { id: `listing-shown-${key}`, type: "checkbox" });
    shown.checked = listing.shownTables === null || listing.shownTables.includes(key);
    const describe = h("input", { id: `listing-table-${key}`, type: "text", maxlength: "1000" });
    describe.value = notes.description ?? "";
    const columns = new Map<string, HTMLInputElement>();
    const columnFields = table.columns.map((column) => {
      const input = h("input", {
        id: `listing-column-${key}-${column.name}`,
        type: "text",
        maxlength: "500",
      });
      input.value = notes.columns?.[column.name] ?? "";
      columns.set(column.name, input);
      return h(
        "div",
        { class: "field" },
        h("label", { for: input.id, text: `${column.name} (${column.type})` }),
        input,
      );
    });
    return {
      key,
      shown,
      description: describe,
      columns,
      element: h(
        "div",
        { class: "listing-table", "data-table": key },
        h(
          "div",
          { class: "field inline" },
          shown,
          h("label", {
            for: shown.id,
            text: `Show ${key} (${table.kind}${table.approximateRows === null ? "" : `, about ${table.approximateRows} rows`})`,
          }),
        ),
        h("div", { class: "field" }, h("label", { for: describe.id, text: `What ${key} holds` }), describe),
        h("details", {}, h("summary", { text: `Describe the columns of ${key}` }), ...columnFields),
      ),
    };
  });

  const read = listing.refreshError
    ? `Your tables could not be read (${listing.refreshError}); these are from ${listing.refreshedAt ?? "never"}.`
    : listing.refreshedAt
      ? `Tables as read from your database at ${listing.refreshedAt.replace("T", " ").slice(0, 19)} UTC.`
      : "Your tables are read from your database when you save.";
  const form = h(
    "form",
    { id: "listing-form", novalidate: true },
    h(
      "div",
      { class: "field inline" },
      listed,
      h("label", { for: listed.id, text: "Listed in the public catalog" }),
    ),
    h("p", {
      class: "hint",
      id: "listing-listed-hint",
      text: "Agents find listed providers with GET /api/providers, MCP's search_providers and x402 discovery: your name, description, tags, prices, terms and the tables below, never a row or your connection details.",
    }),
    h("div", { class: "field" }, h("label", { for: name.id, text: "Name in the catalog" }), name),
    h("div", { class: "field" }, h("label", { for: description.id, text: "Description" }), description),
    h(
      "div",
      { class: "field" },
      h("label", { for: tags.id, text: "Tags" }),
      tags,
      h("p", {
        class: "hint",
        id: "listing-tags-hint",
        text: "Up to 10, separated by commas: lower-case letters, digits and -",
      }),
    ),
    h(
      "fieldset",
      { id: "listing-tables" },
      h("legend", { text: "Tables" }),
      h("p", { class: "hint", text: read }),
      ...rows.map((row) => row.element),
    ),
    h("button", { type: "submit", text: "Save listing" }),
    status,
  );

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    for (const input of form.querySelectorAll("input, textarea")) input.removeAttribute("aria-invalid");
    status.textContent = "Saving…";
    const tableDescriptions: Record<string, TableNotes> = {};
    for (const row of rows) {
      const columns = Object.fromEntries(
        [...row.columns]
          .filter(([, input]) => input.value.trim() !== "")
          .map(([n, input]) => [n, input.value.trim()]),
      );
      const notes: TableNotes = {};
      if (row.description.value.trim() !== "") notes.description = row.description.value.trim();
      if (Object.keys(columns).length > 0) notes.columns = columns;
      if (notes.description !== undefined || notes.columns !== undefined) tableDescriptions[row.key] = notes;
    }
    const everyTable = rows.every((row) => row.shown.checked);
    const body = {
      listed: listed.checked,
      name: name.value.trim(),
      description: description.value.trim(),
      tags: tags.value
        .split(",")
        .map((tag) => tag.trim())
        .filter((tag) => tag !== ""),
      tableDescriptions,
      shownTables: everyTable ? null : rows.filter((row) => row.shown.checked).map((row) => row.key),
    };
    try {
      const saved = await providerApi<Listing>(credentials, "listing", { method: "PUT", body });
      const when = `Saved${saved.listed ? ": listed in the catalog" : ": not listed"}.`;
      renderListingForm(container, credentials, saved, when);
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      status.textContent = `Not saved: ${message}`;
      if (!(error instanceof ApiError) || error.status !== 400) return;
      const field = /\btags?\b/i.test(message)
        ? tags
        : /\bname\b/.test(message)
          ? name
          : /\bdescription\b/.test(message)
            ? description
            : undefined;
      field?.setAttribute("aria-invalid", "true");
      field?.focus();
    }
  });
  show(container, form);
}
