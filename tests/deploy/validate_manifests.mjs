// Validates every object of the given Kubernetes YAML files against the API
// schemas that npm's kubernetes-models carries; the Kustomization files'
// patches are validated as the kind they patch. Exit 0 when every object is
// valid, 1 otherwise (each error named by file, kind and name). Runs from a
// folder whose node_modules has both packages (check_manifests.sh copies it
// there).
//   usage: node validate_manifests.mjs FILE.yaml...
import { readFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { parseAllDocuments } from "yaml";

// "apps/v1" + "Deployment" -> kubernetes-models/apps/v1/Deployment
async function modelFor(apiVersion, kind) {
  return (await import(`kubernetes-models/${apiVersion}/${kind}`))[kind];
}

// What the schemas cannot say (they accept unknown and misspelt fields
// too): the properties deploy/kubernetes/README.md promises of oasr's pods.
function policyProblems(deployment) {
  const pod = deployment.spec?.template?.spec ?? {};
  const problems = [];
  for (const c of pod.containers ?? []) {
    if (c.name !== "oasr") continue;
    const sc = c.securityContext ?? {};
    if (sc.readOnlyRootFilesystem !== true) problems.push("root filesystem not read-only");
    if (sc.allowPrivilegeEscalation !== false) problems.push("privilege escalation allowed");
    if (!(sc.capabilities?.drop ?? []).includes("ALL")) problems.push("capabilities not dropped");
    const env = Object.fromEntries((c.env ?? []).map((e) => [e.name, e.value]));
    const grace = Number(env.OASR_SHUTDOWN_GRACE ?? 7);
    // The grace, then up to a second for the cancelled streams' endings.
    const period = pod.terminationGracePeriodSeconds ?? 30;
    if (!(period > grace + 2)) {
      problems.push(`terminationGracePeriodSeconds ${period} is not above the grace ${grace} s + 2 s`);
    }
    for (const probe of ["startupProbe", "readinessProbe", "livenessProbe"]) {
      if (c[probe]?.grpc === undefined) problems.push(`no gRPC ${probe}`);
    }
    if (c.image?.endsWith(":latest") || c.imagePullPolicy === "Always") {
      problems.push("a local image needs a versioned tag and imagePullPolicy IfNotPresent");
    }
    if (c.resources?.limits?.memory === undefined) problems.push("no memory limit");
  }
  if (pod.securityContext !== undefined && pod.securityContext.runAsNonRoot !== true) {
    problems.push("runAsNonRoot not set");
  }
  return problems;
}

let failures = 0;
let checked = 0;
const docs = [];
for (const file of process.argv.slice(2)) {
  for (const doc of parseAllDocuments(readFileSync(file, "utf8"))) docs.push({ file, doc });
}
// Patches name only what they change: the schema applies, the policy not.
const patches = new Set();
for (const { file, doc } of docs) {
  const object = doc.errors.length === 0 ? doc.toJS() : null;
  if (object?.kind !== "Kustomization") continue;
  for (const patch of object.patches ?? []) {
    if (patch.path) patches.add(resolve(dirname(file), patch.path));
  }
}
for (const { file, doc } of docs) {
  if (doc.errors.length > 0) {
    console.error(`${file}: YAML: ${doc.errors[0].message}`);
    failures++;
    continue;
  }
  const object = doc.toJS();
  if (object === null) continue;
  const label = `${file}: ${object.kind} ${object.metadata?.name ?? "(unnamed)"}`;
  if (object.kind === "Kustomization") {
    console.log(`${label}: kustomize file, its patches are checked as their kinds`);
    continue;
  }
  try {
    const Model = await modelFor(object.apiVersion, object.kind);
    new Model(object).validate();
    const isPatch = patches.has(resolve(file));
    const problems = object.kind === "Deployment" && !isPatch ? policyProblems(object) : [];
    if (problems.length > 0) throw new Error(problems.join("; "));
    console.log(`${label}: valid${isPatch ? " (a patch: schema only)" : ""}`);
    checked++;
  } catch (error) {
    console.error(`${label}: ${error.message}`);
    failures++;
  }
}
console.log(`${checked} objects valid, ${failures} errors`);
process.exit(failures === 0 && checked > 0 ? 0 : 1);
