"""A framework plugin in a few lines: what a user package needs to add a framework.

It registers under the entry-point group ``mastif.frameworks`` (see ``entry_points.txt``
beside it) and meets :class:`mastif.frameworks.base.FrameworkAdapter`: it calls the model
only through the run's gateway URL with the run's token, and tools only through
``ctx.call_tool`` (this one offers the model no tools). Its "orchestration" is a plain loop
over the plan, as a framework without a workflow construct of its own would have it.
"""

from __future__ import annotations

import httpx
from mastif.workflow import PlannedNode, drive_workflow, render_prompt

from mastif.frameworks.base import RunContext


class TinyAdapter:
    name = "tiny"
    #: distributions a stack of this framework runs on (provenance records their versions)
    packages = ("httpx",)

    async def run_node(self, ctx: RunContext, node: PlannedNode, step: int, prompt: str) -> str:
        ctx.at(node.name, step)
        async with httpx.AsyncClient(timeout=60) as client:
            response = await client.post(
                f"{ctx.llm_base_url(node.name)}/chat/completions",
                headers={"Authorization": f"Bearer {ctx.gateway_token}"},
                json={
                    "model": ctx.model_name,
                    "messages": [{"role": "user", "content": prompt}],
                    "max_tokens": ctx.generation.max_tokens,
                },
            )
        response.raise_for_status()
        return response.json()["choices"][0]["message"]["content"] or ""

    async def run(self, ctx: RunContext) -> str:
        async def visit(node: PlannedNode, step: int) -> str:
            prompt = render_prompt(
                node, ctx.task, ctx.recorder.node_outputs, step, ctx.plan.max_steps, [],
                prompt_format=ctx.plan.prompt_format,
            )  # fmt: skip
            text = await self.run_node(ctx, node, step, prompt)
            ctx.recorder.node_output(node.name, step, node.spec.output_key, text)
            return text

        await drive_workflow(ctx.plan, visit)
        outputs = ctx.recorder.node_outputs
        return outputs[-1].text if outputs else ""
