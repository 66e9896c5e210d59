import type { Pricing } from "../answers.js";
import { ApiError, type Credentials, providerApi } from "../api.js";
import { h, show } from "../dom.js";

interface Field {
  name: NumberFieldName;
  label: string;
  hint: string;
  step: string;
}

type NumberFieldName =
  | "basePricePer1000Rows"
  | "markupMultiplier"
  | "minimumCostPerStatement"
  | "pricePerMB"
  | "pricePerSecond"
  | "maxRowsWrittenPerStatement"
  | "lockTimeoutMs"
  | "idleInTransactionTimeoutMs";

/** What a statement costs: every price POST /api/providers/:id/pricing accepts but the table prices. */
const PRICE_FIELDS: Field[] = [
  {
    name: "basePricePer1000Rows",
    label: "Price per 1000 rows (USDC)",
    hint: "0 to 1 000 000, at most 6 decimals",
    step: "0.000001",
  },
  {
    name: "markupMultiplier",
    label: "Markup multiplier",
    hint: "1 to 100, at most 6 decimals; 1 means no markup",
    step: "0.000001",
  },
  {
    name: "minimumCostPerStatement",
    label: "Minimum per statement (USDC)",
    hint: "0 to 1000; no statement that runs costs less (the markup does not apply); 0: none",
    step: "0.000001",
  },
  {
    name: "pricePerMB",
    label: "Price per MB of results (USDC)",
    hint: "0 to 1 000 000 per 1 000 000 bytes sent to the agent; 0: none",
    step: "0.000001",
  },
  {
    name: "pricePerSecond",
    label: "Price per second of statement time (USDC)",
    hint: "0 to 1 000 000, charged per millisecond the database works on a statement; 0: none",
    step: "0.000001",
  },
];

/** The limits a provider sets on agents' statements. */
const LIMIT_FIELDS: Field[] = [
  {
    name: "maxRowsWrittenPerStatement",
    label: "Most rows a statement may write",
    hint: "1 to 10 000 000; more is rolled back",
    step: "1",
  },
  { name: "lockTimeoutMs", label: "Lock timeout (ms)", hint: "1 to 600 000", step: "1" },
  {
    name: "idleInTransactionTimeoutMs",
    label: "Idle in transaction timeout (ms)",
    hint: "1000 to 3 600 000",
    step: "1",
  },
];

const FIELDS = [...PRICE_FIELDS, ...LIMIT_FIELDS];

/** What a provider with no pricing yet starts from: no price typed, no markup, the gateway's default limits. */
const FIRST_PRICING: Omit<Pricing, "updatedAt" | "readOnly" | "basePricePer1000Rows"> = {
  markupMultiplier: 1,
  minimumCostPerStatement: 0,
  pricePerMB: 0,
  pricePerSecond: 0,
  tablePrices: {},
  allowRowFolding: false,
  maxRowsWrittenPerStatement: 1000,
  lockTimeoutMs: 5000,
  idleInTransactionTimeoutMs: 30000,
};

/** A typed number, or the text itself so that the gateway says what is wrong with it. */
function typedValue(input: HTMLInputElement): number | string {
  const text = input.value.trim();
  return text !== "" && Number.isFinite(Number(text)) ? Number(text) : text;
}

/** One row of the table prices editor. */
interface TablePriceRow {
  element: HTMLElement;
  table: HTMLInputElement;
  price: HTMLInputElement;
}

/** Where a gateway error belongs: an input, and the element its message goes into. */
interface Placed {
  input: HTMLInputElement | undefined;
  error: HTMLElement;
  message: string;
}

/**
 * The gateway's message in the form's words: the API's field names (`basePricePer1000Rows`, `body/lockTimeoutMs`,
 * `tablePrices["orders"]`) become the labels the provider sees.
 */
function inLabels(message: string): string {
  let text = message.replace(/^invalid pricing: /, "");
  text = text.replace(/tablePrices\[("[^"]*")\]/g, (_all, name: string) => `The price of table ${name}`);
  for (const field of FIELDS)
    text = text.replace(new RegExp(`(body/)?\\b${field.name}\\b`, "g"), `"${field.label}"`);
  text = text.replace(/(body\/)?\btablePrices\b/g, '"Table prices"');
  return text.charAt(0).toUpperCase() + text.slice(1);
}

/**
 * The pricing form: every price and limit the gateway accepts, the table prices as rows to add, change and remove,
 * filled with the current values (or, for a provider with no pricing yet, ready for its first). On a 400 the
 * message, in the form's words, is shown beside the field it concerns (and that field gets focus), otherwise
 * under the form.
 */
export function renderPricingForm(
  container: Element,
  credentials: Credentials,
  pricing: Pricing | null,
  saved: (p: Pricing, note: string) => void,
  note = "",
): void {
  const current = pricing ?? { ...FIRST_PRICING, basePricePer1000Rows: Number.NaN };
  const inputs = new Map<NumberFieldName, HTMLInputElement>();
  const errors: HTMLElement[] = [];
  const status = h("p", { class: "status", role: "status", id: "pricing-status", text: note });
  const fieldOf = (field: Field) => {
    const input = h("input", {
      id: `pricing-${field.name}`,
      name: field.name,
      type: "number",
      inputmode: "decimal",
      step: field.step,
      required: true,
      "aria-describedby": `pricing-${field.name}-hint pricing-${field.name}-error`,
    });
    const value = current[field.name];
    input.value = Number.isNaN(value) ? "" : String(value);
    const error = h("p", { class: "error", id: `pricing-${field.name}-error` });
    inputs.set(field.name, input);
    errors.push(error);
    return h(
      "div",
      { class: "field" },
      h("label", { for: input.id, text: field.label }),
      input,
      h("p", { class: "hint", id: `pricing-${field.name}-hint`, text: field.hint }),
      error,
    );
  };

  const tables = tablePricesEditor(current.tablePrices, current.allowRowFolding);
  errors.push(tables.error);
  const form = h(
    "form",
    { id: "pricing-form", novalidate: true },
    h(
      "p",
      { class: "hint", id: "pricing-intro" },
      pricing
        ? "What agents pay: max(minimum, markup x (rows x price + MB x price per MB + seconds x price per second))."
        : "No pricing yet: agents cannot query until you save a price per 1000 rows.",
    ),
    h("fieldset", {}, h("legend", { text: "Prices" }), ...PRICE_FIELDS.map(fieldOf), tables.fieldset),
    h("fieldset", {}, h("legend", { text: "Limits on agents' statements" }), ...LIMIT_FIELDS.map(fieldOf)),
    h("button", { type: "submit", text: pricing ? "Save pricing" : "Save first pricing" }),
    status,
  );

  /** The input and error element a gateway message concerns, or the status line when none. */
  const place = (message: string): Placed => {
    const field = FIELDS.find((f) => new RegExp(`\\b${f.name}\\b`).test(message));
    if (field)
      return {
        input: inputs.get(field.name),
        error: errors.find((e) => e.id === `pricing-${field.name}-error`)!,
        message,
      };
    if (/\btablePrices\b/.test(message)) {
      const named = /"([^"]*)"/.exec(message)?.[1];
      const rows = tables.rows().filter((row) => row.table.value.trim() === named);
      // "names x twice": the second is the one to change; "[x] must be …": its price; otherwise its name.
      const row = /twice/.test(message) ? rows[1] : rows[0];
      const input = row && /\]/.test(message) ? row.price : row?.table;
      return { input: input ?? tables.rows()[0]?.table, error: tables.error, message };
    }
    return { input: undefined, error: status, message };
  };

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    for (const error of errors) error.textContent = "";
    for (const input of form.querySelectorAll("input")) input.removeAttribute("aria-invalid");
    status.textContent = "Saving…";
    const body: Record<string, unknown> = Object.fromEntries(
      [...inputs].map(([name, input]) => [name, typedValue(input)]),
    );
    body.tablePrices = tables.value();
    body.allowRowFolding = tables.allowRowFolding();
    try {
      const updated = await providerApi<Pricing>(credentials, "pricing", { method: "POST", body });
      const when = `Saved at ${updated.updatedAt.replace("T", " ").slice(0, 19)} UTC.`;
      status.textContent = when;
      saved(updated, when);
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      const placed = error instanceof ApiError && error.status === 400 ? place(message) : undefined;
      if (!placed?.input) {
        status.textContent = `Not saved: ${error instanceof ApiError && error.status === 400 ? inLabels(message) : message}`;
        return;
      }
      status.textContent = "Not saved: see the field marked above.";
      placed.error.textContent = inLabels(placed.message);
      placed.input.setAttribute("aria-invalid", "true");
      placed.input.focus();
    }
  });
  show(container, form);
}

/**
 * The table prices as rows of a table name and its price per 1000 rows, each removable, and a button that adds
 * one. `value()` is the object the gateway takes (an empty row is left out; a half-filled one is sent as it is,
 * so the gateway says what is missing).
 */
function tablePricesEditor(initial: Record<string, number>, allowRowFolding: boolean) {
  const list = h("div", { class: "table-prices", id: "table-prices-rows" });
  const error = h("p", { class: "error", id: "pricing-tablePrices-error", role: "alert" });
  const rows: TablePriceRow[] = [];
  let made = 0;
  const renumber = () =>
    rows.forEach((row, index) => {
      row.element.querySelector<HTMLLabelElement>("label.table-name")!.textContent = `Table ${index + 1}`;
      row.element.querySelector<HTMLLabelElement>("label.table-price")!.textContent =
        `Price of table ${index + 1} per 1000 rows (USDC)`;
      row.element.querySelector("button")!.textContent = `Remove table ${index + 1}`;
    });
  const add = (name: string, price: number | string) => {
    made++;
    const table = h("input", { id: `table-price-name-${made}`, type: "text", spellcheck: "false" });
    table.value = name;
    const priceInput = h("input", {
      id: `table-price-value-${made}`,
      type: "number",
      inputmode: "decimal",
      step: "0.000001",
    });
    priceInput.value = String(price);
    const remove = h("button", { type: "button", class: "secondary" });
    const element = h(
      "div",
      { class: "table-price" },
      h("div", { class: "field inline" }, h("label", { class: "table-name", for: table.id }), table),
      h(
        "div",
        { class: "field inline" },
        h("label", { class: "table-price", for: priceInput.id }),
        priceInput,
      ),
      remove,
    );
    const row = { element, table, price: priceInput };
    remove.addEventListener("click", () => {
      rows.splice(rows.indexOf(row), 1);
      element.remove();
      renumber();
    });
    rows.push(row);
    list.append(element);
    renumber();
    return row;
  };
  for (const [name, price] of Object.entries(initial)) add(name, price);
  const addButton = h("button", {
    type: "button",
    class: "secondary",
    id: "add-table-price",
    text: "Add a table",
  });
  addButton.addEventListener("click", () => add("", "").table.focus());
  const folding = h("input", {
    id: "pricing-allowRowFolding",
    type: "checkbox",
    "aria-describedby": "allow-row-folding-hint",
  });
  folding.checked = allowRowFolding;
  const fieldset = h(
    "fieldset",
    { id: "table-prices", "aria-describedby": "table-prices-hint pricing-tablePrices-error" },
    h("legend", { text: "Table prices" }),
    h("p", {
      class: "hint",
      id: "table-prices-hint",
      text: "A statement that reads one of these tables pays its price per 1000 rows instead of the one above (the highest when it reads several). Name a table as table or schema.table.",
    }),
    list,
    addButton,
    h(
      "div",
      { class: "field inline" },
      folding,
      h("label", { for: folding.id, text: "Allow folding a priced table's rows into one value" }),
    ),
    h("p", {
      class: "hint",
      id: "allow-row-folding-hint",
      text: "string_agg, array_agg, json_agg, ARRAY(subquery) and the like over a priced table; off, they are refused, since one row would carry many rows' values at one row's price.",
    }),
    error,
  );
  return {
    fieldset,
    error,
    rows: () => rows,
    allowRowFolding: () => folding.checked,
    value: () =>
      Object.fromEntries(
        rows
          .filter((row) => row.table.value.trim() !== "" || row.price.value.trim() !== "")
          .map((row) => [row.table.value.trim(), typedValue(row.price)]),
      ),
  };
}

/** The read-only switch: agents' sessions refuse every write while it is on. */
export function renderReadOnlySwitch(
  container: Element,
  credentials: Credentials,
  pricing: Pricing | null,
  saved: (p: Pricing, note: string) => void,
  note = "",
): void {
  if (!pricing) {
    show(
      container,
      h("p", {
        class: "hint",
        id: "read-only-note",
        text: "Save a first pricing above; agents' sessions can then be made read-only here.",
      }),
    );
    return;
  }
  const toggle = h("button", {
    type: "button",
    role: "switch",
    id: "read-only-switch",
    "aria-checked": String(pricing.readOnly),
    "aria-describedby": "read-only-note",
  });
  const label = h("span", { text: pricing.readOnly ? "Read-only: on" : "Read-only: off" });
  toggle.append(h("span", { class: "knob", "aria-hidden": "true" }), label);
  const status = h("p", { class: "status", role: "status", id: "read-only-status", text: note });
  toggle.addEventListener("click", async () => {
    status.textContent = "Saving…";
    try {
      const updated = await providerApi<Pricing>(credentials, "pricing", {
        method: "POST",
        body: {
          basePricePer1000Rows: pricing.basePricePer1000Rows,
          markupMultiplier: pricing.markupMultiplier,
          readOnly: !pricing.readOnly,
        },
      });
      saved(
        updated,
        updated.readOnly ? "Agents' sessions are read-only from now on." : "Agents may write again.",
      );
    } catch (error) {
      status.textContent = `Not changed: ${error instanceof Error ? error.message : String(error)}`;
    }
  });
  show(
    container,
    toggle,
    h("p", {
      id: "read-only-note",
      class: "hint",
      text: "On: every agent session is read-only, so PostgreSQL refuses every write. Applies to new sessions and the next REST request.",
    }),
    status,
  );
}
