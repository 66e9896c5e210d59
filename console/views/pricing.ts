import type { Pricing } from "../answers.js";
import { ApiError, type Credentials, providerApi } from "../api.js";
import { h, show } from "../dom.js";

/** Every number POST /api/providers/:id/pricing accepts, with its label and what it means. */
const FIELDS = [
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
] as const;

type FieldName = (typeof FIELDS)[number]["name"];

/** The field a gateway error names (`invalid pricing: markupMultiplier must be …`, `body/lockTimeoutMs …`). */
function fieldOf(message: string): FieldName | undefined {
  return FIELDS.find((field) => new RegExp(`\\b${field.name}\\b`).test(message))?.name;
}

/** A typed number, or the text itself so that the gateway says what is wrong with it. */
function typedValue(input: HTMLInputElement): number | string {
  const text = input.value.trim();
  return text !== "" && Number.isFinite(Number(text)) ? Number(text) : text;
}

/**
 * The pricing form: every field the gateway accepts, filled with the current values; on a 400 the message is
 * shown beside the field it names (and that field gets focus), otherwise under the form.
 */
export function renderPricingForm(
  container: Element,
  credentials: Credentials,
  pricing: Pricing,
  saved: (p: Pricing, note: string) => void,
): void {
  const inputs = new Map<FieldName, HTMLInputElement>();
  const errors = new Map<FieldName, HTMLElement>();
  const status = h("p", { class: "status", role: "status", id: "pricing-status" });
  const fields = FIELDS.map((field) => {
    const input = h("input", {
      id: `pricing-${field.name}`,
      name: field.name,
      type: "number",
      inputmode: "decimal",
      step: field.step,
      required: true,
      "aria-describedby": `pricing-${field.name}-hint pricing-${field.name}-error`,
    });
    input.value = String(pricing[field.name]);
    const error = h("p", { class: "error", id: `pricing-${field.name}-error` });
    inputs.set(field.name, input);
    errors.set(field.name, error);
    return h(
      "div",
      { class: "field" },
      h("label", { for: input.id, text: field.label }),
      input,
      h("p", { class: "hint", id: `pricing-${field.name}-hint`, text: field.hint }),
      error,
    );
  });
  const form = h(
    "form",
    { id: "pricing-form", novalidate: true },
    ...fields,
    h("button", { type: "submit", text: "Save pricing" }),
    status,
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    for (const [name, error] of errors) {
      error.textContent = "";
      inputs.get(name)?.removeAttribute("aria-invalid");
    }
    status.textContent = "Saving…";
    const body = Object.fromEntries([...inputs].map(([name, input]) => [name, typedValue(input)]));
    try {
      const updated = await providerApi<Pricing>(credentials, "pricing", { method: "POST", body });
      status.textContent = `Saved at ${updated.updatedAt.replace("T", " ").slice(0, 19)} UTC.`;
      saved(updated, "");
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      const field = error instanceof ApiError && error.status === 400 ? fieldOf(message) : undefined;
      status.textContent = field ? "Not saved: see the field marked below." : `Not saved: ${message}`;
      if (field) {
        errors.get(field)!.textContent = message;
        const input = inputs.get(field)!;
        input.setAttribute("aria-invalid", "true");
        input.focus();
      }
    }
  });
  show(container, form);
}

/** The read-only switch: agents' sessions refuse every write while it is on. */
export function renderReadOnlySwitch(
  container: Element,
  credentials: Credentials,
  pricing: Pricing,
  saved: (p: Pricing, note: string) => void,
  note = "",
): void {
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
