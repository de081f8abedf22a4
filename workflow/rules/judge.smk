rule judge_runs:
    input:
        runs=results.runs(),
        tasks=results.tasks(),
        rubric=config["judge"]["rubric"],
        judge_files=get_judge_model_files,
    output:
        judged=results.judged(),
    log:
        run="logs/judge_runs/{model}/{protocol}/{framework}.log",
        server="logs/judge_runs/{model}/{protocol}/{framework}.server.log",
    # as soon as the stack's runs exist, before the next stack's runs (gather_runs), unless
    # those are a local model's (get_execute_priority)
    priority: 10
    retries: config["execution"]["job_retries"]
    resources:
        local_model_slots=get_judge_resource("local_model_slots"),
        remote_model_slots=get_judge_resource("remote_model_slots"),
        # a local judge: half of timing_lock, never beside an execute_stack job of a local
        # model (whose CT it would slow)
        timing_lock=get_judge_resource("timing_lock"),
    params:
        judge_model=config["judge"]["model"],
        judge_models=get_judge_panel(),
        judge_model_specs=get_judge_model_specs(),
        judge_repeats=config["judge"]["repeats"],
        temperature=config["judge"]["temperature"],
        max_tokens=config["judge"]["max_tokens"],
        attempts=config["judge"]["attempts"],
        seed=config["judge"]["seed"],
        reference_guided=config["judge"]["reference_guided"],
        node_chars=config["judge"]["node_chars"],
        tool_chars=config["judge"]["tool_chars"],
        answer_chars=config["judge"]["answer_chars"],
        provider_retries=config["execution"]["provider_retries"],
        response_cache=config["execution"]["response_cache"],
        # every finished judgement, outside the declared outputs: a killed job resumes
        checkpoint=results.judge_checkpoint(),
    script:
        "../scripts/judge_runs.py"
