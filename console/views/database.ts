import type { DatabaseCheck } from "../answers.js";
import { type Credentials, providerApi } from "../api.js";
import { h, show } from "../dom.js";
import { utc } from "../format.js";

/** Checks that the registered database answers, now and on every press of the button. */
export function renderDatabaseCheck(container: Element, credentials: Credentials): void {
  const result = h("p", { id: "database-result", role: "status" });
  const button = h("button", { type: "button", class: "secondary", text: "Check again" });
  const check = async () => {
    result.textContent = "Checking…";
    try {
      const answer = await providerApi<DatabaseCheck>(credentials, "database");
      result.className = answer.reachable ? "ok" : "bad";
      result.textContent = answer.reachable
        ? `Reachable: answered in ${answer.latencyMs} ms (${utc(answer.checkedAt)}).`
        : `Not reachable: ${answer.error} (${utc(answer.checkedAt)}).`;
    } catch (error) {
      result.className = "bad";
      result.textContent = `Could not check: ${error instanceof Error ? error.message : String(error)}`;
    }
  };
  button.addEventListener("click", check);
  show(container, result, button);
  void check();
}
