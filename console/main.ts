import "uplot/dist/uPlot.min.css";
import "./console.css";
import type {
  Agents,
  Earnings,
  Listing,
  Pricing,
  ProviderAccount,
  Refusals,
  Statements,
  Summary,
} from "./answers.js";
import { ApiError, type Credentials, providerApi } from "./api.js";
import { card, h, show } from "./dom.js";
import { customRange, type Granularity, PRESETS, rangeOf, rangeQuery } from "./range.js";
import { forgetCredentials, saveCredentials, savedCredentials } from "./session.js";
import { renderDatabaseCheck } from "./views/database.js";
import { followWidth, renderEarnings } from "./views/earnings.js";
import { renderListingForm } from "./views/listing.js";
import { renderPricingForm, renderReadOnlySwitch } from "./views/pricing.js";
import { renderAgents, renderRefusals, renderStatements } from "./views/rankings.js";
import { renderSummary } from "./views/summary.js";

const byId = <T extends HTMLElement>(id: string) => document.getElementById(id) as T;

/** Why a sign-in failed, in words, and which field it concerns. */
function signInProblem(error: unknown): { field: "provider-id" | "api-key"; message: string } {
  if (error instanceof ApiError && error.status === 401)
    return { field: "api-key", message: "Wrong API key for this provider." };
  if (error instanceof ApiError && error.status === 404)
    return { field: "provider-id", message: "No provider has this id." };
  if (error instanceof ApiError && error.status === 400)
    return {
      field: "provider-id",
      message: "A provider id is a UUID, like 1b4e28ba-2fa1-11d2-883f-0016d3cca427.",
    };
  return {
    field: "api-key",
    message: `Could not sign in: ${error instanceof Error ? error.message : String(error)}`,
  };
}

async function signIn(credentials: Credentials): Promise<void> {
  // Any route checks the key; the summary is the first thing shown anyway.
  await providerApi<Summary>(credentials, "summary");
  saveCredentials(credentials);
  openDashboard(credentials);
}

function failedPanel(body: Element, error: unknown): void {
  show(
    body,
    h("p", {
      class: "bad",
      text: `Could not load: ${error instanceof Error ? error.message : String(error)}`,
    }),
  );
}

function openDashboard(credentials: Credentials): void {
  byId("sign-in").hidden = true;
  byId("who").hidden = false;
  byId("who-id").textContent = `Provider ${credentials.providerId}`;
  providerApi<ProviderAccount>(credentials, "account").then(
    (account) => {
      byId("who-id").textContent = account.name;
      byId("who-id").title = `Provider ${account.providerId}`;
    },
    () => {},
  );
  const dashboard = byId<HTMLDivElement>("dashboard");
  dashboard.hidden = false;

  const preset = h(
    "select",
    { id: "range-preset" },
    ...PRESETS.map((p) => h("option", { value: p.value, text: p.label, selected: p.value === "7d" })),
    h("option", { value: "custom", text: "Days of my choice" }),
  );
  const today = new Date().toISOString().slice(0, 10);
  const firstDay = h("input", { id: "range-from", type: "date", value: today, max: today });
  const lastDay = h("input", { id: "range-to", type: "date", value: today, max: today });
  const rangeError = h("p", { class: "error", id: "range-error", role: "alert" });
  const days = h(
    "div",
    { class: "controls", id: "custom-range", hidden: true },
    h("div", { class: "field inline" }, h("label", { for: "range-from", text: "From" }), firstDay),
    h(
      "div",
      { class: "field inline" },
      h("label", { for: "range-to", text: "To (inclusive, UTC)" }),
      lastDay,
    ),
    rangeError,
  );
  const granularity = h(
    "select",
    { id: "granularity" },
    h("option", { value: "day", text: "By day" }),
    h("option", { value: "hour", text: "By hour" }),
  );
  const controls = h(
    "form",
    { class: "controls", id: "range-form", "aria-label": "Choose the range" },
    h("div", { class: "field inline" }, h("label", { for: "range-preset", text: "Range" }), preset),
    h("div", { class: "field inline" }, h("label", { for: "granularity", text: "Earnings" }), granularity),
    h("button", { type: "submit", class: "secondary", text: "Refresh" }),
    days,
  );
  const summary = card("summary", "Summary");
  const earnings = card("earnings", "Earnings");
  const agents = card("agents", "Top agents");
  const statements = card("statements", "Top statements");
  const refusals = card("refusals", "Refusals by rule");
  const pricing = card("pricing", "Pricing");
  const readOnly = card("read-only", "Read-only");
  const database = card("database", "Database");
  const listing = card("listing", "Catalog listing");
  show(
    dashboard,
    controls,
    h(
      "div",
      { class: "grid" },
      summary.section,
      earnings.section,
      agents.section,
      statements.section,
      refusals.section,
      pricing.section,
      readOnly.section,
      database.section,
      listing.section,
    ),
  );
  followWidth(earnings.body);

  const load = () => {
    const custom = preset.value === "custom";
    days.hidden = !custom;
    rangeError.textContent = "";
    const range = custom
      ? customRange(firstDay.value, lastDay.value, granularity.value as Granularity)
      : rangeOf(preset.value, granularity.value as Granularity);
    if (!range) {
      rangeError.textContent = "Choose a first day on or before the last day.";
      return;
    }
    granularity.value = range.granularity;
    const query = rangeQuery(range);
    providerApi<Summary>(credentials, `summary?${query}`).then(
      (s) => renderSummary(summary.body, s),
      (e) => failedPanel(summary.body, e),
    );
    providerApi<Earnings>(credentials, `earnings?${query}&granularity=${range.granularity}`).then(
      (e) => renderEarnings(earnings.body, e),
      (e) => failedPanel(earnings.body, e),
    );
    const shown: Agents["agents"] = [];
    const page = (cursor: string | null) =>
      providerApi<Agents>(
        credentials,
        `agents?${query}&limit=10${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`,
      ).then(
        (answer) => {
          shown.push(...answer.agents);
          renderAgents(agents.body, shown, answer.nextCursor ? () => page(answer.nextCursor) : null);
        },
        (e) => failedPanel(agents.body, e),
      );
    void page(null);
    providerApi<Statements>(credentials, `statements?${query}`).then(
      (s) => renderStatements(statements.body, s),
      (e) => failedPanel(statements.body, e),
    );
    providerApi<Refusals>(credentials, `refusals?${query}`).then(
      (r) => renderRefusals(refusals.body, r),
      (e) => failedPanel(refusals.body, e),
    );
  };
  controls.addEventListener("submit", (event) => {
    event.preventDefault();
    load();
  });
  preset.addEventListener("change", load);
  granularity.addEventListener("change", load);
  firstDay.addEventListener("change", load);
  lastDay.addEventListener("change", load);
  load();

  // The switch posts the current price with its new mode, so it is drawn again after every save; the form keeps
  // what was typed and its own status line, except after a provider's first pricing, when both are drawn anew.
  const showSwitch = (current: Pricing, note = "") =>
    renderReadOnlySwitch(readOnly.body, credentials, current, showSwitch, note);
  const showPricing = (current: Pricing | null, note = "") => {
    const saved = (next: Pricing, when: string) => (current ? showSwitch(next) : showPricing(next, when));
    renderPricingForm(pricing.body, credentials, current, saved, note);
    if (current) showSwitch(current);
    else renderReadOnlySwitch(readOnly.body, credentials, null, showSwitch);
  };
  providerApi<Pricing>(credentials, "pricing").then(
    (current) => showPricing(current),
    (e) => {
      // A provider that has not priced yet sets its first price here.
      if (e instanceof ApiError && e.status === 404 && /no pricing yet/.test(e.message))
        return showPricing(null);
      failedPanel(pricing.body, e);
      failedPanel(readOnly.body, e);
    },
  );
  renderDatabaseCheck(database.body, credentials);
  providerApi<Listing>(credentials, "listing").then(
    (current) => renderListingForm(listing.body, credentials, current),
    (e) => failedPanel(listing.body, e),
  );
  byId("main").focus();
}

function start(): void {
  const form = byId<HTMLFormElement>("sign-in-form");
  const idInput = byId<HTMLInputElement>("provider-id");
  const keyInput = byId<HTMLInputElement>("api-key");
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    for (const id of ["provider-id", "api-key"]) {
      byId(`${id}-error`).textContent = "";
      byId(id).removeAttribute("aria-invalid");
    }
    try {
      await signIn({ providerId: idInput.value.trim(), apiKey: keyInput.value.trim() });
    } catch (error) {
      const problem = signInProblem(error);
      byId(`${problem.field}-error`).textContent = problem.message;
      const input = byId(problem.field);
      input.setAttribute("aria-invalid", "true");
      input.focus();
    }
  });
  byId("sign-out").addEventListener("click", () => {
    forgetCredentials();
    location.reload();
  });
  // A link from `pgtoll dev` may carry the provider id (never the key) in the fragment.
  const fromLink = new URLSearchParams(location.hash.slice(1)).get("provider");
  if (fromLink) idInput.value = fromLink;
  // A key saved earlier in this tab is checked again: it may have been replaced since.
  const saved = savedCredentials();
  if (saved) signIn(saved).catch(() => forgetCredentials());
}

start();
