"use strict";
const crypto = require("node:crypto");
const { test, expect } = require("@playwright/test");
const { api, base, uniqueName, createDatabase, deleteDatabase, putDocs } = require("./helpers");

// The document page's attachments card: list (name, type, size, hash),
// download, upload through the form, delete with a confirmation.
let db;
test.beforeEach(async () => {
  db = uniqueName("pwatt");
  await createDatabase(db);
});
test.afterEach(async () => {
  await deleteDatabase(db);
});

const docURL = (id) => base() + "/studio/db/" + db + "/doc?id=" + encodeURIComponent(id);
const sha = (b) => crypto.createHash("sha256").update(b).digest("base64");
const item = (page, name) => page.locator(`[data-testid=doc-attachment][data-name="${name}"]`);

test.describe("attachments", () => {
  test("list, download, upload and delete on the document page", async ({ page }) => {
    await putDocs(db, [{ id: "files/1", body: { title: "with files", "@metadata": { "@collection": "Files" } } }]);
    // One stored through the API (content generated here).
    const api1 = crypto.randomBytes(3000);
    const r = await fetch(base() + "/databases/" + db + "/attachments?id=files%2F1&name=api.bin&contentType=application%2Fx-test", { method: "PUT", body: api1 });
    expect(r.status).toBe(201);

    await page.goto(docURL("files/1"));
    await expect(page.getByTestId("doc-attachments-count")).toHaveText("(1)");
    const row = item(page, "api.bin");
    await expect(row.getByTestId("doc-attachment-type")).toHaveText("application/x-test");
    await expect(row.getByTestId("doc-attachment-size")).toHaveAttribute("data-bytes", "3000");
    await expect(row.getByTestId("doc-attachment-hash")).toHaveText(sha(api1));

    // Download: the same bytes, as a file.
    const [download] = await Promise.all([page.waitForEvent("download"), row.getByTestId("doc-attachment-download").click()]);
    expect(download.suggestedFilename()).toBe("api.bin");
    const fs = require("node:fs");
    const got = fs.readFileSync(await download.path());
    expect(sha(got)).toBe(sha(api1));

    // Upload through the form.
    const up = Buffer.from("hello <b>attachments</b>\n".repeat(100));
    await page.getByTestId("doc-attachment-file").setInputFiles({ name: "notes.html", mimeType: "text/html", buffer: up });
    await page.getByTestId("doc-attachment-upload").click();
    await expect(page).toHaveURL(/id=files%2F1/);
    await expect(page.getByTestId("doc-attachments-count")).toHaveText("(2)");
    const uploaded = item(page, "notes.html");
    await expect(uploaded.getByTestId("doc-attachment-type")).toHaveText("text/html");
    await expect(uploaded.getByTestId("doc-attachment-hash")).toHaveText(sha(up));
    const fetched = await fetch(base() + "/databases/" + db + "/attachments?id=files%2F1&name=notes.html");
    expect(fetched.status).toBe(200);
    expect(fetched.headers.get("content-security-policy")).toBe("sandbox");
    expect(sha(Buffer.from(await fetched.arrayBuffer()))).toBe(sha(up));

    // The document lists both in its metadata.
    const doc = await api("GET", "/databases/" + db + "/docs?id=files%2F1");
    expect(doc.json.Results[0]["@metadata"]["@attachments"].map((a) => a.Name)).toEqual(["api.bin", "notes.html"]);

    // Delete needs the confirmation.
    await row.getByTestId("doc-attachment-delete-open").click();
    await row.getByTestId("doc-attachment-delete-confirm").check();
    await row.getByTestId("doc-attachment-delete").click();
    await expect(page.getByTestId("doc-attachments-count")).toHaveText("(1)");
    await expect(item(page, "api.bin")).toHaveCount(0);
    const gone = await fetch(base() + "/databases/" + db + "/attachments?id=files%2F1&name=api.bin");
    expect(gone.status).toBe(404);
  });
});
