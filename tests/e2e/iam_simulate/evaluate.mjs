// Reads {"cases": [{"id", "policies": [{"name", "policy"}], "action", "resource",
// "account", "context"}]} on stdin; writes {"<id>": {"decision", "errors"?}} on stdout.
// Each case is evaluated by @cloud-copilot/iam-simulate in strict mode: identity policies
// only (no resource, organisation or boundary policies), as a function's role is.
import { runSimulation } from '@cloud-copilot/iam-simulate'

const chunks = []
for await (const chunk of process.stdin) chunks.push(chunk)
const { cases } = JSON.parse(Buffer.concat(chunks).toString('utf8'))
const out = {}
for (const c of cases) {
  const result = await runSimulation(
    {
      request: {
        principal: `arn:aws:iam::${c.account}:role/${c.role ?? 'function-role'}`,
        action: c.action,
        resource: { resource: c.resource, accountId: c.account },
        contextVariables: c.context ?? {}
      },
      identityPolicies: c.policies,
      serviceControlPolicies: [],
      resourceControlPolicies: []
    },
    { simulationMode: 'Strict' }
  )
  out[c.id] =
    result.resultType === 'error'
      ? { decision: 'Error', errors: result.errors }
      : { decision: result.overallResult, ignored: result.result?.ignoredContextKeys ?? [] }
}
process.stdout.write(JSON.stringify(out))
